"""The official top-down pose post-processing before COCO AP: instance scores and OKS-NMS.

* instance score = bbox score x mean of the keypoint scores above ``keypoint_score_thr`` (0.2);
  0 when no keypoint passes;
* OKS-NMS per image at ``nms_thr`` (0.9): instances are visited by descending score, and every
  remaining instance whose OKS with the kept one is above the threshold is dropped. The OKS here
  uses the mean area of the two instances and all keypoints; it is rounded to float32 before the
  comparison (the reference implementation stores it in float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluators.pose.oks import oks_matrix_symmetric_area


def instance_scores(bbox_scores: np.ndarray, keypoint_scores: np.ndarray, keypoint_score_thr: float = 0.2):
    """Instance scores of N instances.

    Args:
        bbox_scores: N detector box scores (1 for GT boxes).
        keypoint_scores: N x K keypoint scores.
        keypoint_score_thr: keypoints with a score above this count in the mean.

    Returns:
        N float64 scores.
    """
    ks = np.asarray(keypoint_scores, dtype=np.float64)
    valid = ks > keypoint_score_thr
    n_valid = valid.sum(1)
    mean = np.where(n_valid > 0, (ks * valid).sum(1) / np.maximum(n_valid, 1), 0.0)
    return np.asarray(bbox_scores, dtype=np.float64) * mean


def oks_nms(
    keypoints: np.ndarray, scores: np.ndarray, areas: np.ndarray, sigmas: np.ndarray, thr: float = 0.9
):
    """OKS-NMS of the instances of one image.

    Args:
        keypoints: N x K x 2 keypoints.
        scores: N instance scores.
        areas: N instance areas.
        sigmas: K sigmas.
        thr: instances with OKS > thr to a kept, higher-scored instance are dropped.

    Returns:
        Indices kept, in visiting order (descending score; among equal scores the later one first).
    """
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ovr = oks_matrix_symmetric_area(np.asarray(keypoints, np.float64), np.asarray(areas, np.float64), sigmas)
    ovr = ovr.astype(np.float32)
    order = np.argsort(np.asarray(scores), kind="stable")[::-1]
    alive = np.ones(n, dtype=bool)
    keep = []
    for i in order:
        if not alive[i]:
            continue
        keep.append(i)
        alive &= ~(ovr[i] > thr)
    return np.asarray(keep, dtype=np.int64)


def to_coco_results(
    image_ids: Sequence,
    keypoints: np.ndarray,
    keypoint_scores: np.ndarray,
    bbox_scores: np.ndarray,
    areas: np.ndarray,
    sigmas: np.ndarray,
    category_ids: Sequence[int] | None = None,
    keypoint_score_thr: float = 0.2,
    nms_thr: float | None = 0.9,
) -> list[dict]:
    """Score instances, run OKS-NMS per image and return COCO keypoint results.

    Args:
        image_ids: N image ids.
        keypoints: N x K x 2 keypoints in image pixels.
        keypoint_scores: N x K scores.
        bbox_scores: N box scores.
        areas: N instance areas (for the NMS scale).
        sigmas: K sigmas.
        category_ids: N category ids (default 1).
        keypoint_score_thr: see :func:`instance_scores`.
        nms_thr: OKS-NMS threshold; None disables NMS.

    Returns:
        A list of ``{image_id, category_id, keypoints (K*3), score}``, grouped by image.
    """
    n = len(image_ids)
    kps = np.asarray(keypoints, dtype=np.float64).reshape(n, -1, 2)
    ks = np.asarray(keypoint_scores, dtype=np.float64).reshape(n, -1)
    scores = instance_scores(bbox_scores, ks, keypoint_score_thr)
    cats = [1] * n if category_ids is None else list(category_ids)
    groups: dict = {}
    for i, iid in enumerate(image_ids):
        groups.setdefault(iid, []).append(i)
    results = []
    for iid, members in groups.items():
        members = np.asarray(members)
        if nms_thr is None:
            kept = members
        else:
            kept = members[
                oks_nms(kps[members], scores[members], np.asarray(areas)[members], sigmas, nms_thr)
            ]
        for i in kept:
            flat = np.concatenate([kps[i], ks[i][:, None]], 1).reshape(-1)
            results.append(
                {
                    "image_id": iid,
                    "category_id": int(cats[i]),
                    "keypoints": flat.tolist(),
                    "score": float(scores[i]),
                }
            )
    return results
