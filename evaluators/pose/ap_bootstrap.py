"""COCO keypoint AP of resampled test images, exact and vectorised over the resamples.

Matching is per image (greedy, per OKS threshold), so drawing an image ``c`` times repeats its
matching outcome ``c`` times. A resample ``idx[r]`` (image positions, with repeats) is read as the
dataset whose images are ``sort(idx[r])``, each copy a new image placed after its sorted position:
:func:`resampled_ap` returns exactly what :func:`evaluators.pose.coco_ap.evaluate_keypoints` gives
on that dataset (same detection order: score descending, then image, then rank within the image;
same 101-point precision; same mean), without rebuilding and re-matching it. The per-resample
work is one stable sort of the resample's detections and cumulative sums, batched over resamples.

Example:
    >>> import numpy as np
    >>> from evaluators.pose.coco_ap import CategoryMatches
    >>> m = CategoryMatches(image=np.array([0, 1]), rank=np.array([0, 0]), score=np.array([0.9, 0.8]),
    ...                     tp=np.array([[True, False]]), fp=np.array([[False, True]]), npig=np.array([1, 1]))
    >>> resampled_ap({1: m}, np.array([[0, 0], [1, 1], [0, 1]])).round(4).tolist()
    [1.0, 0.0, 0.505]
"""

from __future__ import annotations

import numpy as np

from evaluators.pose.coco_ap import RECALL_THRESHOLDS, CategoryMatches

_EPS = np.spacing(1)


def _need_tp(npig: np.ndarray) -> np.ndarray:
    """``R x 101``: the least TP count j with ``j / npig >= t`` (float64 division, as COCOeval)."""
    thr = RECALL_THRESHOLDS[None, :]
    n = np.maximum(npig, 1).astype(np.float64)[:, None]
    j = np.maximum(np.ceil(thr * n) - 2, 0)
    for _ in range(4):  # at most a few steps: j/n is monotone in j
        j = np.where(j / n < thr, j + 1, j)
    return j.astype(np.int64)


def _category_precision(m: CategoryMatches, idx: np.ndarray) -> np.ndarray:
    """``R x T x 101`` interpolated precision of one category (-1 where the resample has no GT)."""
    num_t = m.tp.shape[0]
    n_img = m.npig.shape[0]
    width = int(m.rank.max()) + 1 if m.rank.size else 1
    table = np.full((n_img, width), -1, np.int64)  # detections of each image by rank
    table[m.image, m.rank] = np.arange(m.image.size)
    draws = np.sort(idx, axis=1)
    r_n = draws.shape[0]
    dets = table[draws].reshape(r_n, -1)  # R x L, images in sorted-draw order, ranks within
    real = dets >= 0
    key = np.where(real, -m.score[np.maximum(dets, 0)], np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    dets = np.take_along_axis(dets, order, 1)
    real = np.take_along_axis(real, order, 1)
    safe = np.maximum(dets, 0)
    tp = m.tp[:, safe] & real[None]  # T x R x L
    fp = m.fp[:, safe] & real[None]
    tp, fp = tp.transpose(1, 0, 2), fp.transpose(1, 0, 2)  # R x T x L
    tpc = np.cumsum(tp, axis=2, dtype=np.float64)
    fpc = np.cumsum(fp, axis=2, dtype=np.float64)
    pr = tpc / (fpc + tpc + _EPS)
    pr = np.maximum.accumulate(pr[..., ::-1], axis=2)[..., ::-1]
    npig = m.npig[draws].sum(1)
    length = dets.shape[1]
    # position of the j-th true positive of every (resample, threshold) row
    rr, tt, ll = np.nonzero(tp)
    pos = np.full((r_n, num_t, length + 1), -1, np.int64)
    pos[rr, tt, tpc[rr, tt, ll].astype(np.int64)] = ll
    pos[:, :, 0] = np.where(real[:, :1], 0, -1)  # j = 0: the first detection, if any
    need = _need_tp(npig)[:, None, :].repeat(num_t, 1)  # R x T x 101
    at = np.take_along_axis(pos, np.minimum(need, length), 2)
    at = np.where(need > length, -1, at)
    prec = np.where(at >= 0, np.take_along_axis(pr, np.maximum(at, 0), 2), 0.0)
    prec[npig == 0] = -1.0
    return prec


def resampled_ap(matches: dict, idx: np.ndarray, chunk_elems: int = 1 << 22) -> np.ndarray:
    """AP (mean over OKS thresholds, recall points and categories) of each resample.

    Args:
        matches: ``{category_id: CategoryMatches}`` from ``evaluate_keypoints(keep_matches=True)``.
        idx: ``R x n`` image positions of the resamples.
        chunk_elems: bound on resamples x thresholds x detections per batch (memory).

    Returns:
        ``R`` float64 AP values (-1 where no category of the resample has a non-ignored GT).
    """
    r_n = idx.shape[0]
    cats = [matches[c] for c in sorted(matches)]
    if not cats:
        return np.full(r_n, -1.0)
    per_draw = max(max(int(m.rank.max()) + 1 if m.rank.size else 1 for m in cats), 1)
    num_t = cats[0].tp.shape[0]
    step = max(1, chunk_elems // max(num_t * idx.shape[1] * per_draw, 1))
    out = np.empty(r_n)
    for start in range(0, r_n, step):
        part = idx[start : start + step]
        prec = np.stack([_category_precision(m, part) for m in cats], -1)  # R x T x 101 x C
        if prec.shape[-1] == 1:
            flat = prec.reshape(prec.shape[0], -1)
            ok = flat[:, 0] > -1
            out[start : start + step] = np.where(ok, np.mean(flat, axis=1), -1.0)
            continue
        for j, p in enumerate(prec):  # several categories: COCOeval's mean over the defined entries
            valid = p[p > -1]
            out[start + j] = float(np.mean(valid)) if valid.size else -1.0
    return out
