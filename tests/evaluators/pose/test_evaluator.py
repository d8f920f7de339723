"""PoseEvaluator: the official pipeline, dedup by dataset index, merge, and 2-process DDP."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch

from evaluators.pose.evaluator import PoseEvaluator
from evaluators.pose.pipeline import instance_scores, oks_nms
from evaluators.pose.synthetic import xtcocotools_stats

META = {
    "name": "tiny7",
    "keypoints": [f"k{i}" for i in range(7)],
    "sigmas": [0.03, 0.05, 0.05, 0.07, 0.07, 0.09, 0.1],
    "parts": {"head": [0, 1, 2], "rest": [3, 4, 5, 6]},
}
K = 7


def make_samples(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """n top-down samples (one GT person each, some sharing an image) with noisy predictions."""
    rng = np.random.default_rng(seed)
    image_ids = rng.integers(1, max(2, n // 2), n)
    centre = rng.uniform(50, 400, (n, 1, 2))
    scale = rng.uniform(20, 200, (n, 1, 1))
    gt_xy = centre + rng.normal(0, 1, (n, K, 2)) * scale / 3
    vis = rng.choice([0, 1, 2], (n, K), p=[0.15, 0.25, 0.6])
    lo, hi = gt_xy.min(1), gt_xy.max(1)
    bbox = np.concatenate([lo, hi - lo], 1)
    pred = gt_xy + rng.normal(0, 1, (n, K, 2)) * scale * rng.uniform(0.005, 0.1, (n, 1, 1))
    dup = rng.random(n) < 0.2  # near-duplicates of the previous sample, same image: OKS-NMS drops them
    dup[0] = False
    pred[dup] = np.roll(pred, 1, 0)[dup] + 0.01
    image_ids[dup] = np.roll(image_ids, 1)[dup]
    return {
        "keypoints": pred,
        "keypoint_scores": rng.uniform(0, 1, (n, K)),
        "image_ids": image_ids,
        "bbox_scores": rng.uniform(0.3, 1, n),
        "gt_keypoints": np.concatenate([gt_xy, vis[..., None]], 2),
        "gt_bboxes": bbox,
        "gt_areas": bbox[:, 2] * bbox[:, 3] * 0.7,
    }


def _update(ev, s, idx):
    idx = np.asarray(idx)
    ev.update(
        s["keypoints"][idx],
        s["keypoint_scores"][idx],
        s["image_ids"][idx],
        index=idx,
        bbox_scores=s["bbox_scores"][idx],
        gt_keypoints=s["gt_keypoints"][idx],
        gt_bboxes=s["gt_bboxes"][idx],
        gt_areas=s["gt_areas"][idx],
    )


def test_instance_scores_and_nms_match_reference_loops():
    rng = np.random.default_rng(0)
    ks = rng.uniform(0, 1, (6, K))
    ks[0] = 0.1  # no keypoint above 0.2
    bs = rng.uniform(0, 1, 6)
    want = [b * (np.mean(k[k > 0.2]) if (k > 0.2).any() else 0.0) for b, k in zip(bs, ks)]
    np.testing.assert_allclose(instance_scores(bs, ks), want)


@pytest.mark.openmmlab
def test_nms_matches_mmpose_oks_nms():
    from mmpose.evaluation.functional import oks_nms as mm_oks_nms

    sig = np.asarray(META["sigmas"])
    for seed in range(5):
        rng = np.random.default_rng(seed)
        base = rng.uniform(0, 100, (1, K, 2))
        kp = base + rng.normal(0, rng.uniform(0.5, 8), (8, K, 2))
        scores, areas = rng.uniform(0, 1, 8), rng.uniform(500, 5000, 8)
        db = [
            {"keypoints": np.concatenate([kp[i], np.ones((K, 1))], 1), "score": scores[i], "area": areas[i]}
            for i in range(8)
        ]
        ref = mm_oks_nms(db, 0.9, sigmas=sig)
        np.testing.assert_array_equal(oks_nms(kp, scores, areas, sig, 0.9), ref)


@pytest.mark.xtcocotools
def test_compute_equals_xtcocotools_on_pipeline_output():
    s = make_samples(40, seed=1)
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(40))
    out = ev.compute()
    results = ev.coco_results()
    assert 0 < len(results) < 40  # NMS removed near-duplicates
    ref = xtcocotools_stats(ev.coco_gt(), results, np.asarray(META["sigmas"]))
    for name, v in ref.items():
        assert out[name] == pytest.approx(v, abs=1e-6)
    assert set(out) >= {"head/AP", "rest/AR (L)", "conventions", "num_samples"}
    assert out["num_samples"] == 40.0 and out["conventions"]["use_area"] is True


def test_dedup_merge_and_padding_duplicates():
    s = make_samples(21, seed=2)
    whole = PoseEvaluator(meta=META)
    _update(whole, s, np.arange(21))
    ref = whole.compute()
    a, b = PoseEvaluator(meta=META), PoseEvaluator(meta=META)
    _update(a, s, np.arange(0, 11))
    _update(b, s, np.r_[np.arange(11, 21), [0, 1]])  # padded duplicates of indices 0 and 1
    _update(b, s, [5])  # and one more repeat
    merged = a.merge(b).compute()
    assert merged["num_samples"] == 21.0
    for key, v in ref.items():
        if key != "conventions":
            assert merged[key] == pytest.approx(v, abs=1e-12), key
    with pytest.raises(ValueError, match="keypoints: expected"):
        PoseEvaluator(meta=META).update(np.zeros((2, 3, 2)), np.zeros((2, 3)), [1, 2])
    bad = s["keypoints"][:2].copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PoseEvaluator(meta=META).update(bad, s["keypoint_scores"][:2], [1, 2])


def test_affine_maps_crop_to_image():
    s = make_samples(6, seed=3)
    ev_img = PoseEvaluator(meta=META)
    _update(ev_img, s, np.arange(6))
    # the same predictions given in a crop frame: image = 2 * crop + (10, -5)
    aff = np.tile(np.array([[2.0, 0, 10], [0, 2.0, -5]]), (6, 1, 1))
    crop = (s["keypoints"] - np.array([10, -5])) / 2
    ev_crop = PoseEvaluator(meta=META)
    ev_crop.update(
        torch.from_numpy(crop),
        s["keypoint_scores"],
        s["image_ids"],
        index=np.arange(6),
        affine=aff,
        bbox_scores=s["bbox_scores"],
        gt_keypoints=s["gt_keypoints"],
        gt_bboxes=s["gt_bboxes"],
        gt_areas=s["gt_areas"],
    )
    assert ev_crop.compute()["AP"] == pytest.approx(ev_img.compute()["AP"], abs=1e-12)


def _ddp_worker(rank: int, world: int, port: int, n: int, out_path: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        s = make_samples(n, seed=4)
        per_rank = -(-n // world)
        padded = list(range(n)) + list(range(per_rank * world - n))  # DistributedSampler padding
        mine = padded[rank::world]
        ev = PoseEvaluator(meta=META)
        for start in range(0, len(mine), 2):
            _update(ev, s, mine[start : start + 2])
        ev.sync()
        out = ev.compute()
        iv = ev.bootstrap_intervals(list(ev.bootstrap_keys), resamples=100)
        if rank == 0:
            keep = {k: v for k, v in out.items() if k != "conventions"}
            keep["bootstrap"] = torch.tensor([iv[k] for k in ev.bootstrap_keys], dtype=torch.float64)
            torch.save(keep, out_path)
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
@pytest.mark.ddp
def test_two_process_gloo_equals_single_process(tmp_path):
    import torch.multiprocessing as mp

    n = 13  # odd: the sampler pads one duplicate
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out_path = str(tmp_path / "ddp.pt")
    mp.spawn(_ddp_worker, args=(2, port, n, out_path), nprocs=2, join=True)
    ddp = torch.load(out_path, weights_only=True)
    single = PoseEvaluator(meta=META)
    _update(single, make_samples(n, seed=4), np.arange(n))
    ref = single.compute()
    assert ddp["num_samples"] == n
    iv = single.bootstrap_intervals(list(single.bootstrap_keys), resamples=100)
    ref_iv = torch.tensor([iv[k] for k in single.bootstrap_keys], dtype=torch.float64)
    assert torch.equal(ddp.pop("bootstrap"), ref_iv)
    for key, v in ref.items():
        if key != "conventions":
            assert ddp[key] == pytest.approx(v, abs=1e-12), key


def test_mmengine_pose_metric_adapter():
    from mmengine.evaluator import Evaluator as MMEvaluator

    import evaluators.registry  # noqa: F401  (creates the sapiens2 metric scope, as a config's custom_imports)

    s = make_samples(10, seed=0)
    samples = []
    for i in range(10):
        samples.append(
            {
                "pred_instances": {
                    "keypoints": s["keypoints"][i : i + 1],
                    "keypoint_scores": s["keypoint_scores"][i : i + 1],
                    "bbox_scores": s["bbox_scores"][i : i + 1],
                },
                "img_id": int(s["image_ids"][i]),
                "sample_idx": i,
                "raw_ann_info": {
                    "keypoints": s["gt_keypoints"][i].reshape(-1).tolist(),
                    "bbox": s["gt_bboxes"][i].tolist(),
                    "area": float(s["gt_areas"][i]),
                    "iscrowd": 0,
                },
            }
        )
    ev = MMEvaluator(dict(type="sapiens2.PoseMetric", meta=META))
    ev.process(samples[:5])
    ev.process(samples[5:] + samples[:1])  # a padded duplicate
    out = ev.evaluate(10)
    ref = PoseEvaluator(meta=META)
    _update(ref, s, np.arange(10))
    want = ref.compute()
    assert out["pose/num_samples"] == 10.0
    assert out["pose/AP"] == pytest.approx(want["AP"], abs=1e-12)
    assert out["pose/head/AR"] == pytest.approx(want["head/AR"], abs=1e-12)


def _two_category_case(tmp_path, n: int = 24, seed: int = 3):
    """Samples of two categories (1 and 2) with a COCO GT file holding both."""
    import json

    s = make_samples(n, seed=seed)
    cats = np.random.default_rng(seed).choice([1, 2], n)
    images = sorted({int(i) for i in s["image_ids"]})
    anns = [
        {
            "id": i + 1,
            "image_id": int(s["image_ids"][i]),
            "category_id": int(cats[i]),
            "keypoints": s["gt_keypoints"][i].reshape(-1).tolist(),
            "bbox": s["gt_bboxes"][i].tolist(),
            "area": float(s["gt_areas"][i]),
            "iscrowd": 0,
            "num_keypoints": int((s["gt_keypoints"][i][:, 2] > 0).sum()),
        }
        for i in range(n)
    ]
    gt = {
        "images": [{"id": i, "width": 640, "height": 480} for i in images],
        "annotations": anns,
        "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "mannequin"}],
    }
    path = tmp_path / "gt2.json"
    path.write_text(json.dumps(gt))
    samples = [
        {
            "id": i + 1,
            "img_id": int(s["image_ids"][i]),
            "category_id": int(cats[i]),
            "sample_idx": i,
            "pred_instances": {
                "keypoints": s["keypoints"][i : i + 1],
                "keypoint_scores": s["keypoint_scores"][i : i + 1],
            },
            "gt_instances": {"bbox_scores": s["bbox_scores"][i : i + 1]},
        }
        for i in range(n)
    ]
    return path, samples


@pytest.mark.openmmlab
@pytest.mark.xtcocotools
@pytest.mark.parametrize("exact", [True, False])
def test_pose_metric_honours_category_id_like_mmpose(tmp_path, exact):
    """Two categories: sapiens2.PoseMetric equals mmpose's CocoMetric (old code scored all as 1)."""
    from mmpose.evaluation.metrics import CocoMetric

    from evaluators.pose.mm_metric import PoseMetric

    path, samples = _two_category_case(tmp_path)
    if exact:  # predictions equal to the GT: AP 1.0 for both (the old code gave about 0.5)
        gt = {a["id"]: a for a in __import__("json").loads(path.read_text())["annotations"]}
        for smp in samples:
            kp = np.asarray(gt[smp["id"]]["keypoints"], np.float64).reshape(1, K, 3)
            smp["pred_instances"] = {"keypoints": kp[..., :2], "keypoint_scores": np.ones((1, K))}
    ref = CocoMetric(ann_file=str(path), outfile_prefix=str(tmp_path / "mm"))
    ref.dataset_meta = {"dataset_name": "tiny7", "num_keypoints": K, "sigmas": np.asarray(META["sigmas"])}
    ref.process([], samples)
    want = ref.compute_metrics(ref.results)
    ours = PoseMetric(ann_file=str(path), meta=META)
    ours.process([], samples)
    got = {k.removeprefix("pose/"): v for k, v in ours.evaluate(len(samples)).items()}
    if exact:
        assert want["AP"] == pytest.approx(1.0) and got["AP"] == pytest.approx(1.0)
    for key in ("AP", "AP .5", "AP .75", "AR", "AR .5", "AR .75"):
        assert got[key] == pytest.approx(want[key], abs=1e-6), key
