"""Bootstrap intervals over test images: vectorised resamples equal a naive loop; pose PCK/EPE/AP."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.bootstrap import resample_indices  # noqa: E402
from evaluators.pose.coco_ap import KeypointDetections, KeypointGroundTruth, evaluate_keypoints  # noqa: E402
from evaluators.pose.coco_io import load_coco_gt, load_coco_results  # noqa: E402
from evaluators.pose.evaluator import PoseEvaluator  # noqa: E402
from tests.evaluators.pose.test_evaluator import META, _update, make_samples  # noqa: E402
from tests.evaluators.test_ddp import build, make_dataset, run_over  # noqa: E402

DENSE = ["seg", "normal", "pointmap", "albedo"]


def dense_evaluator(task: str, n: int, seed_offset: int = 0):
    ev = build(task)
    run_over(ev, make_dataset(task, n + seed_offset)[seed_offset:], list(range(n)))
    return ev


def naive_dense(ev, keys, resamples, seed):
    """The production ``compute_from_state`` on states summed from each resample's picked rows."""
    _, rows = ev.sample_rows()
    n = next(iter(rows.values())).shape[0]
    idx = resample_indices(n, resamples, seed)
    full = ev.state()
    out = {k: [] for k in keys}
    for r in range(resamples):
        st = dict(full)
        for k, v in rows.items():
            if ev._reduce[k] == "sum":
                st[k] = torch.from_numpy(v[idx[r]]).sum(0)
        res = ev.compute_from_state(st)
        for k in keys:
            out[k].append(res[k])
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("task", DENSE)
def test_dense_vectorised_equals_naive_loop(task):
    ev = dense_evaluator(task, 9)
    keys = list(ev.bootstrap_keys)
    fast = ev.bootstrap_distribution(keys, resamples=40, seed=3)
    slow = naive_dense(ev, keys, 40, 3)
    for k in keys:
        np.testing.assert_allclose(fast[k], slow[k], rtol=1e-12, atol=1e-12, err_msg=f"{task} {k}")
    if task == "normal":  # integer histogram: bit-exact
        assert np.array_equal(fast["normal_median_deg"], slow["normal_median_deg"])


@pytest.mark.parametrize("task", DENSE)
def test_dense_interval_contains_estimate_shrinks_and_is_deterministic(task):
    head = {"seg": "mIoU", "normal": "normal_mae", "pointmap": "l2_mean", "albedo": "mae"}[task]
    small, large = dense_evaluator(task, 12), dense_evaluator(task, 60)
    assert small.num_images == 12 and large.num_images == 60
    a = small.bootstrap_intervals()
    assert list(a) == [head]  # None: the task's headline
    lo, hi = a[head]
    assert lo <= small.compute()[head] <= hi and lo < hi
    lo2, hi2 = large.bootstrap_intervals()[head]
    assert lo2 <= large.compute()[head] <= hi2
    assert hi2 - lo2 < hi - lo  # 5x the images: a narrower interval
    assert small.bootstrap_intervals(seed=0) == a
    assert small.bootstrap_intervals(seed=1) != a
    lo50, hi50 = small.bootstrap_intervals(level=0.5)[head]
    assert lo <= lo50 < hi50 <= hi


def test_dense_merge_and_unindexed_order_is_canonical():
    items = make_dataset("seg", 10)
    whole = build("seg")
    run_over(whole, items, list(range(10)))
    a, b = build("seg"), build("seg")
    run_over(a, items, [7, 2, 9, 0, 5])
    run_over(b, items, [1, 8, 3, 6, 4, 7])  # 7 padded in again: counted once
    a.merge(b)
    idx, _ = a.sample_rows()
    assert idx.tolist() == list(range(10))
    keys = ["mIoU", "mAcc", "aAcc"]
    assert a.bootstrap_intervals(keys) == whole.bootstrap_intervals(keys)


def test_errors_name_the_problem():
    ev = dense_evaluator("seg", 4)
    with pytest.raises(KeyError, match="cannot bootstrap.*per_class"):
        ev.bootstrap_intervals(["per_class"])
    with pytest.raises(ValueError, match="level"):
        ev.bootstrap_intervals(level=1.5)
    with pytest.raises(ValueError, match="n = 0"):
        build("seg").bootstrap_intervals()
    norm = dense_evaluator("normal", 3)
    with pytest.raises(KeyError, match="normal_median_exact_deg"):
        norm.bootstrap_intervals(["normal_median_exact_deg"])


# ---------------------------------------------------------------- pose


def naive_resampled_ap(gt, dets, draws, sigmas, ids, area_ids) -> float:
    """AP of the dataset holding the drawn images (sorted, each copy a new image), via the engine."""
    draws = np.sort(draws)
    g_rows, g_img, d_rows, d_img = [], [], [], []
    for j, i in enumerate(draws):
        gs = np.nonzero(gt.image_index == i)[0]
        ds = np.nonzero(dets.image_index == i)[0]
        g_rows += gs.tolist()
        d_rows += ds.tolist()
        g_img += [j] * gs.size
        d_img += [j] * ds.size
    g_rows, d_rows = np.array(g_rows, np.int64), np.array(d_rows, np.int64)
    g = KeypointGroundTruth(
        list(range(draws.size)), gt.category_ids, np.array(g_img, np.int64), gt.category[g_rows],
        gt.keypoints[g_rows], gt.area[g_rows], gt.bbox[g_rows], gt.iscrowd[g_rows],
    )  # fmt: skip
    d = KeypointDetections(
        np.array(d_img, np.int64), dets.category[d_rows], dets.keypoints[d_rows], dets.score[d_rows],
        None if dets.area is None else dets.area[d_rows],
    )  # fmt: skip
    return evaluate_keypoints(g, d, sigmas, ids, 20, True, area_keypoint_ids=area_ids).stats["AP"]


@pytest.mark.parametrize("tied_scores", [False, True])
def test_pose_ap_bootstrap_equals_engine_on_resampled_datasets(tied_scores):
    s = make_samples(30, seed=5)
    if tied_scores:  # every instance score equal: the order falls back to image and rank
        s["keypoint_scores"][:] = 0.9
        s["bbox_scores"][:] = 1.0
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(30))
    dist = ev.bootstrap_distribution(["AP", "head/AP"], resamples=25, seed=7)
    gt, _ = load_coco_gt(ev.coco_gt(), 7, use_area=True)
    dets = load_coco_results(ev.coco_results(), gt, 7)
    idx = resample_indices(len(gt.image_ids), 25, 7)
    area_ids = ev.meta.detection_area_ids("body")
    for key, ids in (("AP", None), ("head/AP", META["parts"]["head"])):
        ref = [naive_resampled_ap(gt, dets, idx[r], ev.meta.sigmas, ids, area_ids) for r in range(25)]
        assert dist[key].tolist() == ref, key  # bit-exact
    assert ev.num_images == len(gt.image_ids) < 30  # some samples share an image


def test_pose_ap_bootstrap_several_categories():
    s = make_samples(24, seed=6)
    cats = np.where(np.arange(24) % 3 == 0, 2, 1)
    ev = PoseEvaluator(meta=META)
    ev.update(
        s["keypoints"], s["keypoint_scores"], s["image_ids"], index=np.arange(24),
        bbox_scores=s["bbox_scores"], category_ids=cats, gt_keypoints=s["gt_keypoints"],
        gt_bboxes=s["gt_bboxes"], gt_areas=s["gt_areas"],
    )  # fmt: skip
    dist = ev.bootstrap_distribution(["AP"], resamples=15, seed=2)
    gt, _ = load_coco_gt(ev.coco_gt(), 7, use_area=True)
    dets = load_coco_results(ev.coco_results(), gt, 7)
    idx = resample_indices(len(gt.image_ids), 15, 2)
    ref = [naive_resampled_ap(gt, dets, idx[r], ev.meta.sigmas, None, None) for r in range(15)]
    assert dist["AP"].tolist() == ref


def direct_pck(pred, gt_xyv, boxes, ids=None):
    """PCK@0.05, PCK@0.1 and EPE by the definition, one keypoint at a time."""
    hits = {0.05: 0, 0.1: 0}
    n, err = 0, 0.0
    for p, g, b in zip(pred, gt_xyv, boxes):
        side = max(b[2], b[3])
        if side <= 0:
            continue
        crop_h = 1.25 * max(b[3], b[2] * 1024 / 768)
        for j in range(len(g)) if ids is None else ids:
            if g[j, 2] <= 0:
                continue
            d = math.hypot(p[j, 0] - g[j, 0], p[j, 1] - g[j, 1])
            n += 1
            err += d * 1024 / crop_h
            for t in hits:
                hits[t] += d < t * side
    return hits[0.05] / n, hits[0.1] / n, err / n


def test_pck_and_epe_equal_direct_computation():
    s = make_samples(40, seed=8)
    s["gt_bboxes"][3, 2:] = 0  # a degenerate box: left out, counted
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(40))
    r = ev.compute()
    p05, p10, epe = direct_pck(s["keypoints"], s["gt_keypoints"], s["gt_bboxes"])
    assert r["PCK@0.05_pooled"] == pytest.approx(p05, abs=1e-15)
    assert r["PCK@0.1_pooled"] == pytest.approx(p10, abs=1e-15)
    assert r["EPE"] == pytest.approx(epe, rel=1e-12)
    h05, h10, hepe = direct_pck(s["keypoints"], s["gt_keypoints"], s["gt_bboxes"], META["parts"]["head"])
    assert (r["head/PCK@0.05_pooled"], r["head/PCK@0.1_pooled"]) == (pytest.approx(h05), pytest.approx(h10))
    assert r["head/EPE"] == pytest.approx(hepe, rel=1e-12)
    assert r["pck_degenerate_boxes"] == 1.0
    assert 0 < r["PCK@0.05"] < r["PCK@0.1"] < 1
    # perfect predictions: PCK 1, EPE 0; a shift of 2% of the box side: PCK@0.05 1, PCK@0.1 1
    exact = PoseEvaluator(meta=META)
    s2 = make_samples(10, seed=9)
    s2["keypoints"] = s2["gt_keypoints"][..., :2].copy()
    _update(exact, s2, np.arange(10))
    e = exact.compute()
    assert (e["PCK@0.05"], e["PCK@0.1"], e["PCK@0.1_pooled"], e["EPE"]) == (1.0, 1.0, 1.0, 0.0)


def test_pose_pck_bootstrap_equals_naive_loop_and_merge():
    s = make_samples(30, seed=10)
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(30))
    keys = ["PCK@0.05_pooled", "PCK@0.1_pooled", "EPE", "head/EPE"]
    dist = ev.bootstrap_distribution(keys, resamples=20, seed=4)
    gt, _ = load_coco_gt(ev.coco_gt(), 7, use_area=True)
    idx = resample_indices(len(gt.image_ids), 20, 4)
    for r in range(20):
        draws = [gt.image_ids[i] for i in idx[r]]
        rows = [j for iid in draws for j in np.nonzero(s["image_ids"] == iid)[0]]
        p05, p10, epe = direct_pck(s["keypoints"][rows], s["gt_keypoints"][rows], s["gt_bboxes"][rows])
        assert dist["PCK@0.05_pooled"][r] == pytest.approx(p05, abs=1e-15)
        assert dist["PCK@0.1_pooled"][r] == pytest.approx(p10, abs=1e-15)
        assert dist["EPE"][r] == pytest.approx(epe, rel=1e-12)
    a, b = PoseEvaluator(meta=META), PoseEvaluator(meta=META)
    _update(a, s, np.arange(15, 30))
    _update(b, s, np.r_[np.arange(0, 15), [16]])
    merged = b.merge(a)
    assert merged.bootstrap_intervals(["AP", *keys]) == ev.bootstrap_intervals(["AP", *keys])
    lo, hi = ev.bootstrap_intervals()["EPE"]  # None: the pose headline
    assert lo <= ev.compute()["EPE"] <= hi


def test_pose_errors_and_gt_file_route():
    s = make_samples(10, seed=11)
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(10))
    with pytest.raises(KeyError, match="cannot bootstrap.*AR"):
        ev.bootstrap_intervals(["AR"])
    gt = ev.coco_gt()
    by_file = PoseEvaluator(meta=META, gt=gt)  # GT from a COCO dict: AP only, no per-sample GT for PCK
    by_file.update(s["keypoints"], s["keypoint_scores"], s["image_ids"], index=np.arange(10),
                   bbox_scores=s["bbox_scores"])
    r = by_file.compute()
    assert "PCK@0.1" not in r and r["AP"] == ev.compute()["AP"]
    assert by_file.num_images == ev.num_images
    assert by_file.bootstrap_intervals(["AP"]) == ev.bootstrap_intervals(["AP"])
    with pytest.raises(KeyError, match="need gt_keypoints"):
        by_file.bootstrap_intervals(["EPE"])
    with pytest.raises(ValueError, match="n = 0"):
        PoseEvaluator(meta=META).bootstrap_intervals()
