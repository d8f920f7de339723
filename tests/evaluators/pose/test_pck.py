"""PCK as mmpose computes it (per keypoint type, then the mean) and MPII's PCKh, against mmpose's own
metric classes on mmpose's annotation files (../shared/real)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluators.pose.evaluator import PoseEvaluator
from evaluators.pose.pckh import pckh_metrics

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails


def _mmpose_metrics():
    """mmpose's metric classes (the optional reference: the tests using it carry the openmmlab marker)."""
    from mmpose.evaluation.metrics import MpiiPCKAccuracy, PCKAccuracy

    return PCKAccuracy, MpiiPCKAccuracy


def _coco_case(seed: int):
    gt = json.loads((REAL / "coco" / "test_coco.json").read_text())
    anns = [a for a in gt["annotations"] if not a["iscrowd"]]
    kps = np.array([np.reshape(a["keypoints"], (17, 3)) for a in anns], dtype=np.float64)
    boxes = np.array([a["bbox"] for a in anns], dtype=np.float64)
    rng = np.random.default_rng(seed)
    side = np.maximum(boxes[:, 2], boxes[:, 3])
    pred = kps[..., :2] + rng.normal(0, 1, (len(anns), 17, 2)) * 0.06 * side[:, None, None]
    return anns, kps, boxes, pred


@pytest.mark.openmmlab
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pck_equals_mmpose_pckaccuracy_on_coco_file(seed):
    PCKAccuracy, _ = _mmpose_metrics()
    anns, kps, boxes, pred = _coco_case(seed)
    assert (kps[..., 2] == 0).any()  # some keypoints unlabelled: the two averages differ
    ev = PoseEvaluator(meta="coco17")
    ev.update(
        pred,
        np.ones(pred.shape[:2]),
        [a["image_id"] for a in anns],
        index=np.arange(len(anns)),
        gt_keypoints=kps,
        gt_bboxes=boxes,
        gt_areas=[a["area"] for a in anns],
    )
    ours = ev.compute()
    side = np.maximum(boxes[:, 2], boxes[:, 3])
    for thr in (0.05, 0.1):
        ref = PCKAccuracy(thr=thr, norm_item="bbox")
        res = [
            {
                "pred_coords": pred[i : i + 1],
                "gt_coords": kps[i : i + 1, :, :2],
                "mask": kps[i : i + 1, :, 2] > 0,
                "bbox_size": np.array([[side[i], side[i]]]),
            }
            for i in range(len(anns))
        ]
        want = ref.compute_metrics(res)["PCK"]
        assert ours[f"PCK@{thr}"] == pytest.approx(want, abs=1e-9)
        counted = kps[..., 2] > 0
        hits = (np.linalg.norm(pred - kps[..., :2], axis=-1) < thr * side[:, None]) & counted
        assert ours[f"PCK@{thr}_pooled"] == pytest.approx(hits.sum() / counted.sum(), abs=1e-12)
    assert ours["PCK@0.1"] != pytest.approx(ours["PCK@0.1_pooled"], abs=1e-4)
    assert "mean over the types" in ev.conventions["pck"] and "_pooled" in ev.conventions["pck"]


def _mpii_case(seed: int):
    anns = json.loads((REAL / "mpii" / "test_mpii.json").read_text())
    joints = np.array([a["joints"] for a in anns], dtype=np.float64)  # 1-based (MATLAB), as mmpose reads them
    vis = np.array([a["joints_vis"] for a in anns], dtype=np.float64)
    rng = np.random.default_rng(seed)
    head = np.array([a["scale"] for a in anns]) * 200 / 6.0  # a head size per person (the file has no boxes)
    pred0 = joints - 1 + rng.normal(0, 1, joints.shape) * 0.25 * head[:, None, None]  # 0-based predictions
    vis[0, 3] = 0  # one unlabelled joint, so the labelled counts differ per joint
    return joints, vis, head, pred0


@pytest.mark.openmmlab
@pytest.mark.parametrize("seed", [0, 3])
def test_pckh_equals_mmpose_mpii_pckaccuracy(seed):
    _, MpiiPCKAccuracy = _mmpose_metrics()
    joints, vis, head, pred0 = _mpii_case(seed)
    gt0 = np.concatenate([joints - 1, 2 * vis[..., None]], -1)  # what `data import mpii` stores: 0-based
    ours = pckh_metrics(
        pred0,
        gt0,
        head,
        [
            "right_ankle",
            "right_knee",
            "right_hip",
            "left_hip",
            "left_knee",
            "left_ankle",
            "pelvis",
            "thorax",
            "upper_neck",
            "head_top",
            "right_wrist",
            "right_elbow",
            "right_shoulder",
            "left_shoulder",
            "left_elbow",
            "left_wrist",
        ],
    )
    metric = MpiiPCKAccuracy(norm_item="head")
    res = [
        {
            "pred_coords": pred0[i : i + 1],
            "gt_coords": joints[i : i + 1],
            "mask": vis[i : i + 1] > 0,
            "head_size": np.array([[head[i]]]),
        }
        for i in range(len(head))
    ]
    ref = metric.compute_metrics(res)  # mmpose adds 1 to the predictions (1-based GT)
    assert ours["PCKh@0.5"] * 100 == pytest.approx(float(ref["PCK"]), abs=1e-4)
    assert ours["PCKh@0.1"] * 100 == pytest.approx(float(ref["PCK@0.1"]), abs=1e-4)
    for group in ("head", "shoulder", "elbow", "wrist", "hip", "knee", "ankle"):
        assert ours[f"PCKh/{group}"] * 100 == pytest.approx(float(ref[f"{group.capitalize()} PCK"]), abs=1e-4)
    assert 0 < ours["PCKh@0.1"] < ours["PCKh@0.5"] < 1


def test_pose_evaluator_reports_pckh_with_head_sizes():
    joints, vis, head, pred0 = _mpii_case(0)
    gt0 = np.concatenate([joints - 1, 2 * vis[..., None]], -1)
    boxes = np.concatenate([gt0[..., :2].min(1), np.ptp(gt0[..., :2], 1)], -1)
    ev = PoseEvaluator(meta="mpii16")
    ev.update(
        pred0,
        np.ones(vis.shape),
        list(range(len(head))),
        index=np.arange(len(head)),
        gt_keypoints=gt0,
        gt_bboxes=boxes,
        gt_head_sizes=head,
    )
    r = ev.compute()
    assert r["PCKh@0.5"] == pckh_metrics(pred0, gt0, head, ev.meta.names)["PCKh@0.5"]
    no_head = PoseEvaluator(meta="mpii16")
    no_head.update(pred0, np.ones(vis.shape), list(range(len(head))), gt_keypoints=gt0, gt_bboxes=boxes)
    assert "PCKh@0.5" not in no_head.compute()
    with pytest.raises(ValueError, match="lacks"):
        pckh_metrics(pred0[:, :14], gt0[:, :14], head, [f"k{i}" for i in range(14)])
