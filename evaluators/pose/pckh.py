"""PCKh: PCK normalised by the head size, as MPII's evaluation (and mmpose's ``MpiiPCKAccuracy``) computes it.

The head size of an instance is 0.6 x the diagonal of its annotated head box (MPII's ``SC_BIAS``;
``sapiens2-bench data import mpii --headboxes`` stores it as ``head_size`` on each annotation).
A labelled keypoint (v > 0) is a hit at ``t`` when ``|pred - gt| < t * head_size``; the per-joint
PCKh is its hit rate over the instances labelling it. The summary is MPII's: ``PCKh@0.5`` and
``PCKh@0.1`` weight each joint by how often it is labelled, leaving out the pelvis and the thorax;
``PCKh/<group>`` is the mean of a group's left and right joints (head = head top). Joints are
found by name, so any keypoint set with MPII's joint names gets the same summary.

Example:
    >>> import numpy as np
    >>> gt = np.zeros((1, 16, 3)); gt[..., 2] = 2
    >>> pred = gt[..., :2] + np.array([3.0, 0])  # 3 px off, head size 10: a hit at 0.5, not at 0.1
    >>> r = pckh_metrics(pred, gt, np.array([10.0]), MPII_NAMES)
    >>> r["PCKh@0.5"], r["PCKh@0.1"]
    (1.0, 0.0)
"""

from __future__ import annotations

import numpy as np

MPII_NAMES = (
    "right_ankle", "right_knee", "right_hip", "left_hip", "left_knee", "left_ankle", "pelvis", "thorax",
    "upper_neck", "head_top", "right_wrist", "right_elbow", "right_shoulder", "left_shoulder", "left_elbow",
    "left_wrist",
)  # fmt: skip
HEAD_SIZE_BIAS = 0.6
SUMMARY_GROUPS = {
    "head": ("head_top",),
    "shoulder": ("left_shoulder", "right_shoulder"),
    "elbow": ("left_elbow", "right_elbow"),
    "wrist": ("left_wrist", "right_wrist"),
    "hip": ("left_hip", "right_hip"),
    "knee": ("left_knee", "right_knee"),
    "ankle": ("left_ankle", "right_ankle"),
}
LEFT_OUT_OF_MEAN = ("pelvis", "thorax")
PCKH_THRESHOLDS = (0.5, 0.1)
PCKH_GROUPS = tuple(SUMMARY_GROUPS)


def head_size_from_box(x1: float, y1: float, x2: float, y2: float) -> float:
    """MPII's head size of a head box: 0.6 x its diagonal."""
    return HEAD_SIZE_BIAS * float(np.hypot(x2 - x1, y2 - y1))


def per_joint_pckh(pred_xy, gt_xyv, head_sizes, thr: float) -> tuple[np.ndarray, np.ndarray]:
    """(per-joint hit rate (NaN where a joint is never labelled), per-joint labelled count).

    Instances with a head size <= 0 are left out (no scale), as in mmpose.
    """
    pred_xy, gt_xyv = np.asarray(pred_xy, np.float64), np.asarray(gt_xyv, np.float64)
    hs = np.asarray(head_sizes, np.float64).reshape(-1)
    if pred_xy.shape != gt_xyv[..., :2].shape or hs.shape[0] != pred_xy.shape[0]:
        raise ValueError(
            f"PCKh: predictions {pred_xy.shape}, GT {gt_xyv.shape} and head sizes {hs.shape} disagree "
            "(expected N x K x 2, N x K x 3 and N)"
        )
    if not np.isfinite(hs).all():
        raise ValueError("PCKh: head sizes must be finite")
    counted = (gt_xyv[..., 2] > 0) & (hs > 0)[:, None]
    dist = np.sqrt(((pred_xy - gt_xyv[..., :2]) ** 2).sum(-1))
    hits = counted & (dist < thr * np.where(hs > 0, hs, 1.0)[:, None])
    n = counted.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n > 0, hits.sum(0) / n, np.nan)
    return rate, n


def pckh_metrics(pred_xy, gt_xyv, head_sizes, names, thresholds=PCKH_THRESHOLDS) -> dict[str, float]:
    """MPII's PCKh summary (see the module docstring) for a keypoint set with MPII's joint names.

    Raises:
        ValueError: the set lacks one of the joints the summary needs.
    """
    names = list(names)
    need = sorted({n for g in SUMMARY_GROUPS.values() for n in g} - set(names))
    if need:
        raise ValueError(f"PCKh summary needs MPII's joint names; the keypoint set lacks {need}")
    out: dict[str, float] = {}
    for t in thresholds:
        rate, n = per_joint_pckh(pred_xy, gt_xyv, head_sizes, t)
        keep = np.array([nm not in LEFT_OUT_OF_MEAN for nm in names]) & (n > 0)
        w = np.where(keep, n, 0).astype(np.float64)
        out[f"PCKh@{t}"] = float((np.nan_to_num(rate) * w).sum() / w.sum()) if w.sum() > 0 else float("nan")
        if t == thresholds[0]:
            for group, joints in SUMMARY_GROUPS.items():
                out[f"PCKh/{group}"] = float(np.mean([rate[names.index(j)] for j in joints]))
    return out


def pckh_of_instances(instances: list[dict], names) -> dict[str, float]:
    """PCKh of ``PoseEvaluator`` instance records; empty unless every one has a GT head size."""
    if not instances or not all("head_size" in r.get("gt", {}) for r in instances):
        return {}
    return pckh_metrics(
        np.stack([r["keypoints"] for r in instances]),
        np.stack([r["gt"]["keypoints"] for r in instances]),
        np.array([r["gt"]["head_size"] for r in instances]),
        names,
    )
