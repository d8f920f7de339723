"""Pointmap metrics: the official ``pointmap_evaluator`` keys, raw and after per-image alignment.

Raw keys (official, pixel-pooled over GT-mask pixels, distances in the pointmap's unit, metres):
``l2_mean``, ``rmse``, ``x_mae``/``y_mae``/``z_mae``, ``within_05_cm``/``within_10_cm``/``within_20_cm``
(fractions, strict ``l2 < t``), and from normals of each pointmap (5x5 Sobel derivatives as
OpenCV's ``Sobel(ksize=5)`` with reflect-101 borders, ``n = cross(dP/dx, dP/dy) / (|n| + 1e-6)``):
``normal_mae``, ``normal_rmse``, ``within_*_deg`` (fractions). Extra MoGe-style keys: ``rel_point_err``
(mean of ``|p - g| / |g|``) and ``delta_1.25`` (fraction of pixels with relative error < 0.25).

Aligned keys repeat the distance metrics under the prefixes ``scale_aligned.`` (the paper's
"we optimize for scale") and ``scale_shift_aligned.``, after aligning each image's prediction to its
GT with the closed-form L2 least-squares solver named in the conventions (``lstsq_l2``):
``s = sum<p, g> / sum<p, p>``, or with a 3-D shift ``s = sum<p - p_mean, g - g_mean> / sum|p - p_mean|^2``,
``t = g_mean - s * p_mean`` (sums over the image's valid pixels). Normals are invariant to a positive
scale and a shift, so the normal keys are not repeated.

Example:
    >>> import torch
    >>> gt = torch.rand(1, 3, 8, 8) + 1
    >>> ev = PointmapEvaluator()
    >>> ev.update(2 * gt, gt, torch.ones(1, 8, 8), index=[0])
    >>> r = ev.compute()
    >>> round(r["scale_aligned.l2_mean"], 6), r["within_05_cm"] < 1
    (0.0, True)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluators.base import Evaluator
from evaluators.dense_common import (
    angle_key,
    nonfinite_pixels,
    per_sample_sum,
    pixel_sample_ids,
    prepare_dense_batch,
    require_valid_pixels,
    unit_angle_deg,
)

DEFAULT_DISTANCES = (0.05, 0.1, 0.2)
DEFAULT_ANGLES = (5.0, 11.25, 22.5, 30.0)
VARIANTS = ("", "scale_aligned.", "scale_shift_aligned.")
SOLVER = "lstsq_l2"


def sobel5_kernels(dtype=torch.float32, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """OpenCV's 5x5 Sobel kernels (d/dx, d/dy), as cross-correlation weights 5 x 5.

    Example:
        >>> kx, ky = sobel5_kernels()
        >>> kx[2].tolist(), bool((ky == kx.T).all())
        ([-6.0, -12.0, 0.0, 12.0, 6.0], True)
    """
    smooth = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], dtype=dtype, device=device)
    deriv = torch.tensor([-1.0, -2.0, 0.0, 2.0, 1.0], dtype=dtype, device=device)
    kx = smooth[:, None] * deriv[None, :]
    return kx, kx.T.contiguous()


def sobel5(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel 5x5 Sobel derivatives of B x C x H x W ``x`` (reflect-101 border, as OpenCV).

    Returns:
        (d/dx, d/dy), each B x C x H x W.
    """
    b, c, h, w = x.shape
    if h < 3 or w < 3:
        raise ValueError(f"pointmap: 5x5 Sobel needs H, W >= 3, got {h} x {w}")
    kx, ky = sobel5_kernels(x.dtype, x.device)
    weight = torch.stack([kx, ky])[:, None]  # 2 x 1 x 5 x 5
    xp = F.pad(x.reshape(b * c, 1, h, w), (2, 2, 2, 2), mode="reflect")
    d = F.conv2d(xp, weight).view(b, c, 2, h, w)
    return d[:, :, 0], d[:, :, 1]


def pointmap_normals(points: torch.Tensor) -> torch.Tensor:
    """Normals of a B x 3 x H x W pointmap: cross(dP/dx, dP/dy) / (|.| + 1e-6).

    Example:
        >>> v, u = torch.meshgrid(torch.arange(6.), torch.arange(6.), indexing="ij")
        >>> plane = torch.stack([u, v, torch.ones_like(u)])[None]
        >>> pointmap_normals(plane)[0, :, 3, 3].round(decimals=4).tolist()
        [0.0, 0.0, 1.0]
    """
    dx, dy = sobel5(points)
    n = torch.cross(dx, dy, dim=1)
    return n / (n.norm(dim=1, keepdim=True) + 1e-6)


def align_scale(pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per-image L2 least-squares scale ``s`` (B) minimising ``sum |s p - g|^2`` over valid pixels."""
    v = valid[:, None].to(torch.float64)
    p, g = pred.to(torch.float64) * v, gt.to(torch.float64) * v
    num = (p * g).flatten(1).sum(1)
    den = (p * p).flatten(1).sum(1)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.ones_like(num))


def align_scale_shift(
    pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-image L2 least-squares scale ``s`` (B) and shift ``t`` (B x 3) minimising sum|s p + t - g|^2."""
    v = valid[:, None].to(torch.float64)
    n = v.flatten(1).sum(1).clamp_min(1.0)
    p64, g64 = pred.to(torch.float64), gt.to(torch.float64)
    pm = (p64 * v).flatten(2).sum(2) / n[:, None]
    gm = (g64 * v).flatten(2).sum(2) / n[:, None]
    pc = (p64 - pm[:, :, None, None]) * v
    gc = (g64 - gm[:, :, None, None]) * v
    num = (pc * gc).flatten(1).sum(1)
    den = (pc * pc).flatten(1).sum(1)
    s = torch.where(den > 0, num / den.clamp_min(1e-300), torch.ones_like(num))
    return s, gm - s[:, None] * pm


class PointmapEvaluator(Evaluator):
    """Streaming pointmap evaluator (raw, scale-aligned and scale-and-shift-aligned).

    Args:
        distance_thresholds: ``within_XX_cm`` thresholds in the pointmap's unit (metres).
        angle_thresholds: ``within_*_deg`` thresholds for the Sobel normals (fractions).
        allow_empty_masks: skip samples whose mask is empty instead of raising.
    """

    task = "pointmap"

    def __init__(
        self,
        distance_thresholds=DEFAULT_DISTANCES,
        angle_thresholds=DEFAULT_ANGLES,
        allow_empty_masks: bool = False,
    ) -> None:
        super().__init__()
        self.dist_thr = tuple(float(t) for t in distance_thresholds)
        self.ang_thr = tuple(float(t) for t in angle_thresholds)
        self.allow_empty_masks = allow_empty_masks
        f64, i64 = torch.float64, torch.int64
        self.add_state("pixels", torch.zeros((), dtype=i64))
        self.add_state("nonfinite_pred_pixels", torch.zeros((), dtype=i64))
        for v in VARIANTS:
            self.add_state(v + "sum_l2", torch.zeros((), dtype=f64))
            self.add_state(v + "sum_sq", torch.zeros((), dtype=f64))
            self.add_state(v + "sum_abs", torch.zeros(3, dtype=f64))
            self.add_state(v + "within_dist", torch.zeros(len(self.dist_thr), dtype=i64))
            self.add_state(v + "sum_rel", torch.zeros((), dtype=f64))
            self.add_state(v + "delta", torch.zeros((), dtype=i64))
        self.add_state("normal_pixels", torch.zeros((), dtype=i64))
        self.add_state("sum_angle", torch.zeros((), dtype=f64))
        self.add_state("sum_angle_sq", torch.zeros((), dtype=f64))
        self.add_state("within_angle", torch.zeros(len(self.ang_thr), dtype=i64))
        self.conventions = {
            "pooling": "pixel-pooled over GT-mask pixels of the whole dataset",
            "resize": "pred bilinear (align_corners=False) to GT size",
            "distance_thresholds": list(self.dist_thr),
            "angle_thresholds_deg": list(self.ang_thr),
            "within_units": "fractions, strict < t",
            "normals": "OpenCV-equivalent 5x5 Sobel (reflect-101 border), cross(d/dx, d/dy)/(|n|+1e-6), "
            "angle acos(clamp(dot)) over mask pixels with finite normals",
            "alignment_solver": SOLVER,
            "alignment": "per image over valid pixels: scale s=<p,g>/<p,p>; scale+shift: centred least "
            "squares with a 3-D shift; normal metrics are alignment-invariant and not repeated",
            "rel_point_err": "MoGe-style mean |p-g|/|g|; delta_1.25 = fraction with |p-g|/|g| < 0.25",
            "nonfinite_predictions": "pixels with NaN/Inf predictions are excluded and counted in "
            "nonfinite_pred_pixels",
            "mask": "GT mask > 0.5",
        }

    def _distance_rows(self, pred, gt, valid, sample, b) -> dict[str, torch.Tensor]:
        d = (pred - gt).to(torch.float64).permute(0, 2, 3, 1)[valid]  # N x 3
        g = gt.to(torch.float64).permute(0, 2, 3, 1)[valid]
        l2 = d.norm(dim=1)
        rel = l2 / g.norm(dim=1).clamp_min(1e-12)

        def per_sample(x):
            return per_sample_sum(x, sample, b)

        thr = torch.tensor(self.dist_thr, dtype=torch.float64, device=l2.device)
        return {
            "sum_l2": per_sample(l2),
            "sum_sq": per_sample(l2 * l2),
            "sum_abs": per_sample(d.abs()),
            "within_dist": per_sample((l2[:, None] < thr).to(torch.int64)),
            "sum_rel": per_sample(rel),
            "delta": per_sample((rel < 0.25).to(torch.int64)),
        }

    def batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        """Per-sample statistics.

        Args:
            pred: B x 3 x h x w predicted pointmap (resized to the GT size).
            gt: B x 3 x H x W GT pointmap.
            mask: B x H x W (or B x 1 x H x W) GT mask.
        """
        pred, gt, bad, valid = prepare_dense_batch(pred, gt, mask, "pointmap", 3, self.allow_empty_masks)
        b = gt.shape[0]
        m = valid | bad  # the GT mask
        pred0 = torch.where(torch.isfinite(pred), pred, torch.zeros_like(pred))
        sample = pixel_sample_ids(valid)
        rows: dict[str, torch.Tensor] = {
            "pixels": valid.flatten(1).sum(1),
            "nonfinite_pred_pixels": bad.flatten(1).sum(1),
        }
        s = align_scale(pred0, gt, valid)
        s2, t2 = align_scale_shift(pred0, gt, valid)
        p64 = pred0.to(torch.float64)
        preds = {
            "": pred0,
            "scale_aligned.": p64 * s[:, None, None, None],
            "scale_shift_aligned.": p64 * s2[:, None, None, None] + t2[:, :, None, None],
        }
        for v, p in preds.items():
            for k, val in self._distance_rows(p, gt, valid, sample, b).items():
                rows[v + k] = val
        n_pred, n_gt = pointmap_normals(pred0), pointmap_normals(gt)
        # a non-finite prediction spoils the 5x5 Sobel neighbourhood around it
        near_bad = F.max_pool2d(nonfinite_pixels(pred)[:, None].float(), 5, stride=1, padding=2)[:, 0] > 0
        nvalid = m & ~near_bad
        nsample = pixel_sample_ids(nvalid)
        ang = unit_angle_deg(n_pred, n_gt)[nvalid].to(torch.float64)
        athr = torch.tensor(self.ang_thr, dtype=torch.float64, device=ang.device)
        rows["normal_pixels"] = nvalid.flatten(1).sum(1)
        rows["sum_angle"] = per_sample_sum(ang, nsample, b)
        rows["sum_angle_sq"] = per_sample_sum(ang * ang, nsample, b)
        rows["within_angle"] = per_sample_sum((ang[:, None] < athr).to(torch.int64), nsample, b)
        return rows

    def compute_from_state(self, s: dict[str, torch.Tensor]) -> dict:
        n = require_valid_pixels(s, "PointmapEvaluator")
        out: dict = {}
        for v in VARIANTS:
            out[v + "l2_mean"] = float(s[v + "sum_l2"]) / n
            for axis, val in zip("xyz", s[v + "sum_abs"].tolist()):
                out[f"{v}{axis}_mae"] = val / n
            out[v + "rmse"] = math.sqrt(float(s[v + "sum_sq"]) / n)
            for t, c in zip(self.dist_thr, s[v + "within_dist"].tolist()):
                out[f"{v}within_{round(t * 100):02d}_cm"] = c / n
            out[v + "rel_point_err"] = float(s[v + "sum_rel"]) / n
            out[v + "delta_1.25"] = float(s[v + "delta"]) / n
            if v == "":
                nn_ = int(s["normal_pixels"])
                out["normal_mae"] = float(s["sum_angle"]) / nn_ if nn_ else math.nan
                out["normal_rmse"] = math.sqrt(float(s["sum_angle_sq"]) / nn_) if nn_ else math.nan
                for t, c in zip(self.ang_thr, s["within_angle"].tolist()):
                    out[angle_key(t)] = c / nn_ if nn_ else math.nan
        out["num_pixels"] = float(n)
        out["nonfinite_pred_pixels"] = float(s["nonfinite_pred_pixels"])
        return out
