"""PCK and end-point error of top-down keypoints against the GT of their own instance.

Conventions (recorded in ``PoseEvaluator.conventions``):

* only labelled GT keypoints count (visibility ``v > 0``); each prediction is compared with the GT
  of its own sample (top-down pairing with the GT box, no matching, before OKS-NMS);
* a keypoint is a hit at ``t`` when ``|pred - gt| < t * max(w, h)`` of the GT box (strict; mmpose's
  ``PCKAccuracy(norm_item='bbox')`` normaliser);
* ``PCK@t`` (the default, as mmpose's ``PCKAccuracy`` / ``keypoint_pck_accuracy``): the hit rate of
  each keypoint type over the instances that label it, then the mean over the keypoint types that
  are labelled at least once; ``PCK@t_pooled``: hits over all counted (instance, keypoint) pairs.
  The two agree when every keypoint is labelled in every instance;
* ``EPE``: mean ``|pred - gt|`` over the counted keypoints, in pixels of the 1024 x 768 (h x w)
  top-down crop of the GT box, i.e. each instance's error times ``1024 / H`` where ``H`` is the
  crop height in image pixels: the GT box widened to aspect 3:4 (w:h) and padded by 1.25
  (``sapiens2.datasets.pose.bbox_to_center_scale``, the official top-down crop);
* an instance whose GT box has a zero side (``max(w, h) == 0``) has no scale: it is left out of
  PCK and EPE and counted in ``pck_degenerate_boxes``.

Example:
    >>> import numpy as np
    >>> gt = np.array([[[10.0, 10, 2], [50, 90, 2], [0, 0, 0]]])  # third keypoint unlabelled
    >>> pred = np.array([[[12.0, 10], [50, 80], [99, 99]]])
    >>> st = instance_point_stats(pred, gt, np.array([[10.0, 10, 40, 80]]), {"wholebody": None})
    >>> pck_metrics(st.sum(0), ["wholebody"])["PCK@0.05_pooled"]  # errors 2 and 10 px, box side 80 -> 4 px
    0.5
"""

from __future__ import annotations

import numpy as np

from sapiens2.datasets.pose import bbox_to_center_scale

PCK_THRESHOLDS = (0.05, 0.1)
EPE_CROP_HW = (1024, 768)
CROP_PADDING = 1.25
# columns of the per-instance statistics, per keypoint group
STAT_COLUMNS = ("counted", *(f"hits@{t}" for t in PCK_THRESHOLDS), "epe_sum")


def box_max_side(bboxes: np.ndarray) -> np.ndarray:
    """``max(w, h)`` of N x 4 (x, y, w, h) boxes."""
    return np.maximum(bboxes[:, 2], bboxes[:, 3])


def crop_scale(bboxes: np.ndarray) -> np.ndarray:
    """Image-to-crop scale of the official 1024 x 768 top-down crop of each N x 4 box (NaN if empty)."""
    h_crop, w_crop = EPE_CROP_HW
    out = np.full(bboxes.shape[0], np.nan)
    for i, box in enumerate(bboxes):
        if max(box[2], box[3]) > 0:  # a flat box is widened to 3:4 like any other
            _, scale_wh = bbox_to_center_scale(box, w_crop / h_crop, CROP_PADDING)
            out[i] = h_crop / scale_wh[1]
    return out


def instance_point_stats(
    pred_xy: np.ndarray,
    gt_xyv: np.ndarray,
    gt_bboxes: np.ndarray,
    groups: dict[str, list[int] | None],
    per_keypoint: bool = False,
) -> np.ndarray:
    """Per-instance sums ``N x G x len(STAT_COLUMNS)`` for the keypoint groups.

    Args:
        pred_xy: N x K x 2 predicted keypoints (image pixels).
        gt_xyv: N x K x 3 GT keypoints (x, y, visibility).
        gt_bboxes: N x 4 GT boxes (x, y, w, h).
        groups: group name -> keypoint ids (None: all keypoints), e.g. ``meta.groups()``.
        per_keypoint: return ``N x K x S`` (one row per keypoint, ``groups`` unused) instead.

    Returns:
        float64 array: counted keypoints, hits per PCK threshold, sum of crop-scaled errors.
    """
    dist = np.sqrt(((pred_xy - gt_xyv[..., :2]) ** 2).sum(-1))  # N x K
    side = box_max_side(gt_bboxes)
    counted = (gt_xyv[..., 2] > 0) & (side > 0)[:, None]
    scale = crop_scale(gt_bboxes)
    planes = [counted]
    planes += [counted & (dist < t * side[:, None]) for t in PCK_THRESHOLDS]
    planes.append(np.where(counted, dist * np.nan_to_num(scale)[:, None], 0.0))
    stats = np.stack(planes, -1).astype(np.float64)  # N x K x S
    if per_keypoint:
        return stats
    out = np.zeros((pred_xy.shape[0], len(groups), len(STAT_COLUMNS)))
    for g, ids in enumerate(groups.values()):
        out[:, g] = (stats if ids is None else stats[:, ids]).sum(1)
    return out


def pck_metrics(sums: np.ndarray, group_names: list[str]) -> dict[str, float]:
    """Pooled ``PCK@t_pooled`` and ``EPE`` from ``G x S`` summed statistics (parts prefixed ``part/``)."""
    out = {}
    for g, name in enumerate(group_names):
        prefix = "" if name == "wholebody" else name + "/"
        n = sums[g, 0]
        for j, t in enumerate(PCK_THRESHOLDS):
            out[f"{prefix}PCK@{t}_pooled"] = float(sums[g, 1 + j] / n) if n > 0 else float("nan")
        out[f"{prefix}EPE"] = float(sums[g, -1] / n) if n > 0 else float("nan")
    return out


def keypoint_point_stats(pred_xy: np.ndarray, gt_xyv: np.ndarray, gt_bboxes: np.ndarray) -> np.ndarray:
    """Per-instance, per-keypoint ``N x K x len(STAT_COLUMNS)`` statistics (0/1 flags, crop-scaled error)."""
    return instance_point_stats(pred_xy, gt_xyv, gt_bboxes, {}, per_keypoint=True)


def _group_values(sums: np.ndarray, groups: dict[str, list[int] | None]) -> dict[str, np.ndarray]:
    """Both PCK averages and EPE from ``... x K x S`` sums (any leading shape)."""
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, ids in groups.items():
            prefix = "" if name == "wholebody" else name + "/"
            sub = sums if ids is None else sums[..., ids, :]
            counted = sub[..., 0]
            pooled_n = counted.sum(-1)
            pooled_n = np.where(pooled_n > 0, pooled_n, np.nan)
            per_type_n = np.where(counted > 0, counted, np.nan)
            types = (counted > 0).sum(-1)
            for j, t in enumerate(PCK_THRESHOLDS):
                rate = sub[..., 1 + j] / per_type_n  # NaN for types never labelled
                mean = np.where(types > 0, np.nansum(rate, -1) / np.maximum(types, 1), np.nan)
                out[f"{prefix}PCK@{t}"] = mean
                out[f"{prefix}PCK@{t}_pooled"] = sub[..., 1 + j].sum(-1) / pooled_n
            out[f"{prefix}EPE"] = sub[..., -1].sum(-1) / pooled_n
    return out


def pck_metrics_by_keypoint(sums: np.ndarray, groups: dict[str, list[int] | None]) -> dict[str, float]:
    """``PCK@t`` (mean over keypoint types), ``PCK@t_pooled`` and ``EPE`` from ``K x S`` sums."""
    return {k: float(v) for k, v in _group_values(sums, groups).items()}


def pck_keys(group_names: list[str]) -> list[str]:
    """The keys :func:`pck_metrics_by_keypoint` returns for these groups."""
    groups = {g: None for g in group_names}
    return list(pck_metrics_by_keypoint(np.ones((1, len(STAT_COLUMNS))), groups))


def resampled_pck(
    sums: np.ndarray, groups: dict[str, list[int] | None], keys: list[str]
) -> dict[str, np.ndarray]:
    """The PCK/EPE keys on ``R x K x S`` resampled per-keypoint sums (R values each)."""
    out = _group_values(sums, groups)
    return {k: out[k] for k in keys}
