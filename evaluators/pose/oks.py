"""Vectorised object keypoint similarity (OKS), as defined by the COCO keypoint challenge.

``OKS = mean_i exp(-d_i^2 / (2 * s^2 * k_i^2))`` with ``k_i = 2 * sigma_i`` and ``s^2`` the object
area, averaged over the labelled (v > 0) ground-truth keypoints. A ground truth without labelled
keypoints is compared through the distance of each detected keypoint to the GT box enlarged to
three times its size (every keypoint counts then); COCOeval does the same.
"""

from __future__ import annotations

import numpy as np

# np.spacing(1): the epsilon COCOeval adds to the area.
AREA_EPS = float(np.spacing(1))


def oks_pairs(
    det_idx: np.ndarray,
    gt_idx: np.ndarray,
    det_x: np.ndarray,
    det_y: np.ndarray,
    gt_x: np.ndarray,
    gt_y: np.ndarray,
    gt_labelled: np.ndarray,
    gt_area: np.ndarray,
    gt_bbox: np.ndarray,
    sigmas: np.ndarray,
    chunk_elems: int = 1 << 17,
) -> np.ndarray:
    """OKS of the (detection, ground truth) pairs ``(det_idx[p], gt_idx[p])``, COCOeval's values.

    Args:
        det_idx: P detection rows.
        gt_idx: P ground-truth rows.
        det_x, det_y: D x K detected keypoint coordinates.
        gt_x, gt_y: G x K ground-truth keypoint coordinates.
        gt_labelled: G x K, ground-truth visibility > 0.
        gt_area: G OKS scales (areas).
        gt_bbox: G x 4 GT boxes (x, y, w, h), for GT without labelled keypoints.
        sigmas: K sigmas.
        chunk_elems: bound on pairs x K per chunk (small chunks stay in cache).

    Returns:
        P float64 OKS values.
    """
    num = det_idx.shape[0]
    out = np.zeros(num, dtype=np.float64)
    if num == 0:
        return out
    variances = (np.asarray(sigmas, dtype=np.float64) * 2) ** 2
    step = max(1, chunk_elems // max(det_x.shape[1], 1))
    gt_lab = gt_labelled
    for start in range(0, num, step):
        di, gi = det_idx[start : start + step], gt_idx[start : start + step]
        out[start : start + step] = _oks_chunk(
            det_x[di], det_y[di], gt_x[gi], gt_y[gi], gt_lab[gi], gt_area[gi], gt_bbox[gi], variances
        )
    return out


def _oks_chunk(xd, yd, xg, yg, labelled, gt_area, gt_bbox, variances) -> np.ndarray:
    """OKS of aligned rows; operations in COCOeval's order, in place to spare memory traffic."""
    n_lab = labelled.sum(-1)
    has_lab = n_lab > 0
    dx = np.subtract(xd, xg)
    dy = np.subtract(yd, yg)
    if not has_lab.all():
        # distance to the GT box enlarged by its size on every side
        nl = ~has_lab
        bx, by, bw, bh = (gt_bbox[nl, i : i + 1] for i in range(4))
        x0, x1 = bx - bw, bx + bw * 2
        y0, y1 = by - bh, by + bh * 2
        xn, yn = xd[nl], yd[nl]
        dx[nl] = np.maximum(0.0, x0 - xn) + np.maximum(0.0, xn - x1)
        dy[nl] = np.maximum(0.0, y0 - yn) + np.maximum(0.0, yn - y1)
        labelled[nl] = True
    e = np.multiply(dx, dx, out=dx)
    e += np.multiply(dy, dy, out=dy)
    e /= variances
    e /= (gt_area + AREA_EPS)[:, None]
    e *= -0.5  # exact: a power-of-two scale, same as "/ 2" then negation
    sim = np.exp(e, out=e)
    sim *= labelled
    count = np.where(has_lab, n_lab, xd.shape[1])
    return sim.sum(-1) / count


def oks_matrix_symmetric_area(kpts: np.ndarray, areas: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """OKS between all pairs of N instances of one image, for OKS-NMS.

    The scale is the mean of the two instances' areas and every keypoint counts (mmpose's
    ``oks_iou`` without a visibility threshold).

    Args:
        kpts: N x K x 2 keypoints.
        areas: N instance areas.
        sigmas: K sigmas.

    Returns:
        N x N float64 OKS matrix.
    """
    variances = (np.asarray(sigmas, dtype=np.float64) * 2) ** 2
    d2 = ((kpts[:, None, :, :] - kpts[None, :, :, :]) ** 2).sum(-1)  # N x N x K
    scale = (areas[:, None] + areas[None, :]) / 2 + AREA_EPS
    e = d2 / variances / scale[..., None] / 2
    return np.exp(-e).mean(-1)
