"""Public pose formats scored under their own official convention, never as another set.

The files are built from the real COCO photos and annotations of ``../shared/real/coco`` in the
layout of each public set (mmpose's test files show the layouts): AI Challenger (14 points spelled
``"Right Shoulder"``, no ``area``), CrowdPose (14, no ``area``, ``num_keypoints`` counting visible
joints, ``crowdIndex`` per image), PoseTrack18 (17 with ``head_bottom`` / ``head_top``, no
``area``), Human3.6M (17 with ``"root (pelvis)"``, no OKS sigmas), MHP (MPII's 16 spelled
``"Right-ankle"``) and Human-Art (``keypoints`` + ``keypoints_21``). Points a set has and COCO has
not (neck, head top, pelvis, ...) are placed from the COCO points around them; their positions do
not matter for the comparison, which is against stock xtcocotools on the same file.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json

import numpy as np
import pytest

from evaluators.pose.cli import evaluate_files
from evaluators.pose.crowd import CROWD_STAT_NAMES
from evaluators.pose.synthetic import xtcocotools_stats
from sapiens2.datasets.importers import import_dataset
from sapiens2.vocab import keypoint_set

COCO = keypoint_set("coco17").names


def _derived(kp: dict, name: str):
    """A point COCO lacks, from the labelled COCO points around it (None when they are not labelled)."""
    def mid(a, b):
        return None if kp[a] is None or kp[b] is None else (np.asarray(kp[a]) + np.asarray(kp[b])) / 2

    if name in COCO:
        return kp[name]
    neck = mid("left_shoulder", "right_shoulder")
    if name in ("neck", "head_bottom", "thorax", "upper_neck", "neck_base"):
        return neck
    if name in ("head_top", "top_head", "head"):
        return None if neck is None or kp["nose"] is None else 2 * np.asarray(kp["nose"]) - neck
    if name in ("pelvis", "root", "spine"):
        return mid("left_hip", "right_hip")
    if name in ("left_foot", "right_foot", "left_toe", "right_toe"):
        return kp[name.split("_")[0] + "_ankle"]
    if name in ("left_finger", "right_finger"):
        return kp[name.split("_")[0] + "_wrist"]
    raise KeyError(name)


def _points(ann: dict, names) -> list[float]:
    arr = np.asarray(ann["keypoints"], float).reshape(17, 3)
    kp = {n: (arr[i, :2] if arr[i, 2] > 0 else None) for i, n in enumerate(COCO)}
    vis = {n: int(arr[i, 2]) for i, n in enumerate(COCO)}
    out = []
    for n in names:
        p = _derived(kp, n)
        out += [0.0, 0.0, 0] if p is None else [float(p[0]), float(p[1]), vis.get(n, 2)]
    return out


def make_format(real_dir, spelled, names, area: bool = False, crowd: bool = False) -> dict:
    """The real COCO file rewritten in a set's layout: ``spelled`` keypoint names, its ``names``' points."""
    src = json.loads((real_dir / "coco" / "test_coco.json").read_text())
    anns = []
    for a in src["annotations"]:
        kps = _points(a, names)
        ann = {k: a[k] for k in ("id", "image_id", "bbox", "iscrowd", "category_id")} | {"keypoints": kps}
        v = np.asarray(kps).reshape(-1, 3)[:, 2]
        ann["num_keypoints"] = int((v == 2).sum()) if crowd else int((v > 0).sum())
        if area:
            ann["area"] = a["area"]
        anns.append(ann)
    images = [dict(im) for im in src["images"]]
    if crowd:
        for im, ci in zip(images, (0.05, 0.5, 0.9, 0.3)):  # easy, medium, hard, medium
            im["crowdIndex"] = ci
    cat = {"id": 1, "name": "person", "supercategory": "person", "keypoints": list(spelled)}
    return {"images": images, "annotations": anns, "categories": [cat]}


def make_results(gt: dict, noise: float, seed: int = 0) -> list[dict]:
    """One detection per labelled person: its GT points moved by ``noise`` x sqrt(box area), random scores."""
    rng = np.random.default_rng(seed)
    out = []
    for a in gt["annotations"]:
        kp = np.asarray(a["keypoints"], float).reshape(-1, 3)
        if not (kp[:, 2] > 0).any():
            continue
        scale = np.sqrt(a["bbox"][2] * a["bbox"][3])
        xy = kp[:, :2] + rng.normal(0, noise * scale, kp[:, :2].shape)
        res = np.concatenate([xy, rng.uniform(0.3, 1.0, (len(kp), 1))], 1)
        out.append({"image_id": a["image_id"], "category_id": 1, "keypoints": res.reshape(-1).tolist(),
                    "score": float(rng.uniform(0.5, 1.0))})
    return out


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return path


def _close(ours: dict, ref: dict, tol: float = 1e-9) -> float:
    return max(abs(ours[k] - ref[k]) for k in ref)


AIC_SPELLED = ["Right Shoulder", "Right Elbow", "Right Wrist", "Left Shoulder", "Left Elbow", "Left Wrist",
               "Right Hip", "Right Knee", "Right Ankle", "Left Hip", "Left Knee", "Left Ankle", "Head top",
               "Neck"]  # fmt: skip


@pytest.mark.xtcocotools
@pytest.mark.parametrize("noise", [0.01, 0.05])
def test_ai_challenger_file_is_scored_as_ai_challenger_not_crowdpose(tmp_path, real_dir, noise):
    """14 points named as AI Challenger names them: AIC's sigmas and 0.53 x box (its official
    convention), equal to xtcocotools; CrowdPose's sigmas (the old count-based guess) give another number."""
    aic = keypoint_set("aic14")
    gt = make_format(real_dir, AIC_SPELLED, aic.names)
    res = make_results(gt, noise)
    gt_p, res_p = _write(tmp_path / "aic.json", gt), _write(tmp_path / "res.json", res)
    info, conv = [], []
    ours = evaluate_files(gt_p, res_p, info=info, chosen=conv)["body"]
    assert conv[0]["keypoint_set"] == "aic14" and conv[0]["area"].startswith("0.53 x box")
    assert "keypoint names the file lists" in info[0]
    ref = xtcocotools_stats(gt, res, aic.sigmas, use_area=False)
    assert _close(ours, ref) <= 1e-9
    as_crowdpose = xtcocotools_stats(gt, res, keypoint_set("crowdpose14").sigmas, use_area=False)
    assert abs(as_crowdpose["AP"] - ours["AP"]) > 0.02  # the number the count-based guess printed


@pytest.mark.xtcocotools
def test_posetrack18_file_and_its_imported_split(tmp_path, real_dir):
    pt = keypoint_set("posetrack18")
    gt = make_format(real_dir, pt.names, pt.names)
    res = make_results(gt, 0.03)
    gt_p, res_p = _write(tmp_path / "pt.json", gt), _write(tmp_path / "res.json", res)
    conv = []
    ours = evaluate_files(gt_p, res_p, chosen=conv)["body"]
    assert conv[0]["keypoint_set"] == "posetrack18"
    ref = xtcocotools_stats(gt, res, pt.sigmas, use_area=False)
    assert _close(ours, ref) <= 1e-9
    split = import_dataset("posetrack18", gt_p, tmp_path / "split", images=real_dir / "coco", masks=False)
    manifest = json.loads((split / "pose.json").read_text())
    assert manifest["keypoint_set"] == "posetrack18" and manifest["area_source"].startswith("w * h * 0.53")
    assert json.loads((split / "split.json").read_text())["area_source"] == manifest["area_source"]
    conv = []
    on_split = evaluate_files(split / "pose.json", res_p, chosen=conv)["body"]
    assert _close(on_split, ref) <= 1e-9
    assert "named by the file's keypoint_set" in conv[0]["keypoint_set_from"]
    assert conv[0]["area"] == manifest["area_source"]


def _xtcocotools_crowd(gt_p, res_p, sigmas) -> dict:
    from xtcocotools.coco import COCO
    from xtcocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(gt_p))
        coco_dt = coco_gt.loadRes(str(res_p))
        ev = COCOeval(coco_gt, coco_dt, "keypoints_crowd", np.asarray(sigmas), use_area=False)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return dict(zip(CROWD_STAT_NAMES, (float(s) for s in ev.stats)))


@pytest.mark.xtcocotools
@pytest.mark.parametrize("noise", [0.01, 0.04])
def test_crowdpose_official_stats_equal_xtcocotools_keypoints_crowd(tmp_path, real_dir, noise):
    """The six overall stats and AP easy / medium / hard (by crowdIndex) of xtcocotools' keypoints_crowd,
    on the file and on its imported split."""
    cp = keypoint_set("crowdpose14")
    gt = make_format(real_dir, cp.names, cp.names, crowd=True)
    res = make_results(gt, noise, seed=3)
    gt_p, res_p = _write(tmp_path / "cp.json", gt), _write(tmp_path / "res.json", res)
    ref = _xtcocotools_crowd(gt_p, res_p, cp.sigmas)
    conv = []
    ours = evaluate_files(gt_p, res_p, chosen=conv)["body"]
    assert list(ours) == list(CROWD_STAT_NAMES) and "keypoints_crowd" in conv[0]["evaluation"]
    for k in CROWD_STAT_NAMES[:6]:
        assert abs(ours[k] - ref[k]) <= 1e-9, k
    for k in CROWD_STAT_NAMES[6:]:  # xtcocotools rounds the group APs to 4 places
        assert abs(ours[k] - ref[k]) <= 5e-5 + 1e-12 and round(ours[k], 4) == ref[k], k
    assert ours["AP easy"] != ours["AP hard"]
    split = import_dataset("crowdpose", gt_p, tmp_path / "split", images=real_dir / "coco", masks=False)
    on_split = evaluate_files(split / "pose.json", res_p)["body"]
    assert _close(on_split, ours) <= 1e-9  # num_keypoints (visible joints) and crowdIndex kept


@pytest.mark.xtcocotools
def test_pose_evaluator_declares_and_computes_crowdpose_stats(tmp_path, real_dir):
    """PoseEvaluator on crowdpose14 with a CrowdPose GT: ``crowdpose/<stat>`` are declared metrics and equal
    xtcocotools' keypoints_crowd on the evaluator's own results."""
    from evaluators.pose.evaluator import PoseEvaluator

    cp = keypoint_set("crowdpose14")
    gt = make_format(real_dir, cp.names, cp.names, crowd=True)
    res = make_results(gt, 0.02, seed=5)
    gt_p = _write(tmp_path / "cp.json", gt)
    ev = PoseEvaluator(meta="crowdpose14", gt=str(gt_p), use_area=False)
    kp = np.asarray([r["keypoints"] for r in res]).reshape(len(res), 14, 3)
    ev.update(kp[..., :2], kp[..., 2], [r["image_id"] for r in res], index=list(range(len(res))))
    out = ev.compute()
    ref = _xtcocotools_crowd(gt_p, _write(tmp_path / "res.json", ev.coco_results()), cp.sigmas)
    for k in CROWD_STAT_NAMES[:6]:
        assert abs(out[f"crowdpose/{k}"] - ref[k]) <= 1e-9, k
    for k in CROWD_STAT_NAMES[6:]:
        assert round(out[f"crowdpose/{k}"], 4) == ref[k], k
    computed = {k for k, v in out.items() if isinstance(v, float)}
    assert {f"crowdpose/{k}" for k in CROWD_STAT_NAMES} <= {d.key for d in ev.declared_metrics()} & computed
    assert not PoseEvaluator(meta="coco17").is_crowdpose


def test_crowdpose_without_crowd_index_or_num_keypoints_is_refused(tmp_path, real_dir):
    cp = keypoint_set("crowdpose14")
    gt = make_format(real_dir, cp.names, cp.names, crowd=True)
    res_p = _write(tmp_path / "res.json", make_results(gt, 0.02))
    bad = copy.deepcopy(gt)
    del bad["images"][1]["crowdIndex"]
    with pytest.raises(ValueError, match="image id 40083 has no numeric 'crowdIndex'"):
        evaluate_files(_write(tmp_path / "a.json", bad), res_p)
    bad = copy.deepcopy(gt)
    del bad["annotations"][0]["num_keypoints"]
    with pytest.raises(ValueError, match="no numeric 'num_keypoints'"):
        evaluate_files(_write(tmp_path / "b.json", bad), res_p)


def test_human36m_file_is_a_clear_error_not_coco(tmp_path, real_dir):
    """Human3.6M's 17 points (mmpose's h36m_coco.json spelling) declare no OKS sigmas: AP is refused."""
    h36 = keypoint_set("h36m17")
    spelled = ["root (pelvis)", *h36.names[1:]]
    gt = make_format(real_dir, spelled, h36.names, area=True)
    gt_p = _write(tmp_path / "h36m.json", gt)
    res_p = _write(tmp_path / "res.json", make_results(gt, 0.02))
    with pytest.raises(ValueError, match="h36m17 declares no OKS sigmas.*MPJPE"):
        evaluate_files(gt_p, res_p)
    renamed = copy.deepcopy(gt)
    renamed["categories"][0]["keypoints"] = [f"joint{i}" for i in range(17)]
    with pytest.raises(ValueError, match=r"no built-in keypoint set's.*coco17.*--meta"):
        evaluate_files(_write(tmp_path / "x.json", renamed), res_p)


def test_mhp_and_human_art_import_by_format_name(tmp_path, real_dir):
    """MHP's "Right-ankle" spellings are MPII's 16; Human-Art's keypoints_21 its 21 (COCO's 17 listed)."""
    mpii = keypoint_set("mpii16")
    spelled = [n.replace("_", "-").capitalize() for n in mpii.names]
    gt = make_format(real_dir, spelled, mpii.names, area=True)
    split = import_dataset("mhp", _write(tmp_path / "mhp.json", gt), tmp_path / "mhp",
                           images=real_dir / "coco", masks=False)
    manifest = json.loads((split / "pose.json").read_text())
    assert manifest["keypoint_set"] == "mpii16" and manifest["area_source"] == "the source's 'area'"
    assert [a["area"] for a in manifest["annotations"]] == [a["area"] for a in gt["annotations"]]
    ha = keypoint_set("humanart21")
    art = make_format(real_dir, COCO, COCO, area=True)
    for a, full in zip(art["annotations"], make_format(real_dir, ha.names, ha.names)["annotations"]):
        a["keypoints_21"] = full["keypoints"]
    art_p = _write(tmp_path / "art.json", art)
    for fmt, want, k in (("humanart", "coco17", 17), ("humanart21", "humanart21", 21)):
        m = json.loads((import_dataset(fmt, art_p, tmp_path / fmt, images=real_dir / "coco", masks=False)
                        / "pose.json").read_text())
        assert m["keypoint_set"] == want and len(m["annotations"][0]["keypoints"]) == 3 * k


def test_score_against_reads_the_files_set_and_area_convention(tmp_path, real_dir):
    """``predict --score-against``'s reader: an AI Challenger file by its names with 0.53 x box areas, a
    file mixing areas refused, the score's record saying both."""
    from benchmarks.reproduce.score_predictions import score_pose
    from sapiens2.datasets.coco_people import read_people
    from sapiens2.datasets.io import DatasetError

    aic = keypoint_set("aic14")
    gt = make_format(real_dir, AIC_SPELLED, aic.names)
    people = read_people(_write(tmp_path / "aic.json", gt))
    assert people.keypoint_set.name == "aic14" and people.area_source.startswith("0.53 x box")
    im = people.image("000000040083.jpg")
    x, y, w, h = im.people[0].bbox_xywh
    assert im.people[0].area == pytest.approx(w * h * 0.53, rel=1e-12)
    rng = np.random.default_rng(0)
    preds = [("000000040083.jpg", np.concatenate(
        [rng.uniform(0, 300, (len(im.people), 308, 2)), np.ones((len(im.people), 308, 1))], 2))]
    score = score_pose(people, preds)
    assert score["conventions"]["gt_area"] == people.area_source
    assert score["ground_truth"]["keypoint_set_from"].startswith("by the 14 keypoint names")
    gt["annotations"][0]["area"] = 1000.0
    with pytest.raises(DatasetError, match=r"annotations\[1\] has no 'area' while others have one"):
        read_people(_write(tmp_path / "mixed.json", gt))
