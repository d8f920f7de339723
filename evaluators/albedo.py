"""Albedo metrics (official ``albedo_evaluator`` definitions), pooled over GT-mask pixels.

* ``mae`` / ``rmse``: mean over valid pixels of the channel-averaged ``|d|`` / sqrt of the mean of the
  channel-averaged ``d^2`` (``d`` = pred - GT, pred resized bilinearly to the GT size).
* ``psnr``: ``10 log10(R^2 / MSE)`` with the dataset-level masked MSE; the data range ``R`` comes from
  the GT: 255 when the GT's maximum exceeds 1.5, else 1 (a dataset mixing both raises an error).
* ``ssim``: masked SSIM with an 11 x 11 Gaussian window (sigma 1.5), ``C1 = (0.01 R)^2``,
  ``C2 = (0.03 R)^2``; local moments are mask-weighted (``G(m x) / G(m)``, zero padding), a window
  counts when its mask support ``G(m)`` exceeds 0.5; the SSIM map is averaged over the valid
  windows of the dataset and the channels.
* ``grad_l1``: mean of ``|d_pred - d_gt|`` over horizontal and vertical forward differences whose two
  pixels are both valid, and over channels.

Example:
    >>> import torch
    >>> gt = torch.rand(1, 3, 16, 16)
    >>> ev = AlbedoEvaluator()
    >>> ev.update(gt.clone(), gt, torch.ones(1, 16, 16), index=[0])
    >>> r = ev.compute()
    >>> r["mae"], round(r["ssim"], 6), r["psnr"]
    (0.0, 1.0, inf)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from evaluators.base import Evaluator
from evaluators.dense_common import prepare_dense_batch, require_valid_pixels


def gaussian_window(size: int = 11, sigma: float = 1.5, dtype=torch.float64, device=None) -> torch.Tensor:
    """Normalised 1-D Gaussian of ``size`` taps.

    Example:
        >>> round(float(gaussian_window().sum()), 6)
        1.0
    """
    x = torch.arange(size, dtype=dtype, device=device) - (size - 1) / 2.0
    g = torch.exp(-(x * x) / (2 * sigma * sigma))
    return g / g.sum()


def _blur(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian filter of B x C x H x W with zero padding (same size)."""
    b, c, h, w = x.shape
    k = g.numel()
    y = x.reshape(b * c, 1, h, w)
    y = F.conv2d(y, g.view(1, 1, 1, k), padding=(0, k // 2))
    y = F.conv2d(y, g.view(1, 1, k, 1), padding=(k // 2, 0))
    return y.view(b, c, h, w)


def masked_ssim_map(
    pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor, data_range, size: int = 11, sigma: float = 1.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked Gaussian-window SSIM map.

    Args:
        pred, gt: B x C x H x W images.
        mask: B x H x W bool.
        data_range: scalar or B tensor (``R``).
        size, sigma: Gaussian window.

    Returns:
        (ssim B x C x H x W float64, window_valid B x H x W bool: mask support > 0.5).
    """
    dt = torch.float64
    g = gaussian_window(size, sigma, dt, pred.device)
    m = mask[:, None].to(dt)
    x, y = pred.to(dt), gt.to(dt)
    support = _blur(m, g)
    den = support.clamp_min(1e-12)
    mu_x, mu_y = _blur(m * x, g) / den, _blur(m * y, g) / den
    var_x = _blur(m * x * x, g) / den - mu_x**2
    var_y = _blur(m * y * y, g) / den - mu_y**2
    cov = _blur(m * x * y, g) / den - mu_x * mu_y
    r = torch.as_tensor(data_range, dtype=dt, device=pred.device).reshape(-1, 1, 1, 1)
    c1, c2 = (0.01 * r) ** 2, (0.03 * r) ** 2
    ssim = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return ssim, support[:, 0] > 0.5


class AlbedoEvaluator(Evaluator):
    """Streaming albedo evaluator.

    Args:
        data_range: ``"auto"`` (255 if the GT max > 1.5, else 1, per sample) or a fixed number.
        ssim_window: Gaussian window size; ``ssim_sigma``: its sigma.
        allow_empty_masks: skip samples whose mask is empty instead of raising.
    """

    task = "albedo"

    def __init__(
        self,
        data_range="auto",
        ssim_window: int = 11,
        ssim_sigma: float = 1.5,
        allow_empty_masks: bool = False,
    ) -> None:
        super().__init__()
        if data_range != "auto" and not (isinstance(data_range, (int, float)) and data_range > 0):
            raise ValueError(f"data_range: expected 'auto' or a positive number, got {data_range!r}")
        self.data_range, self.ssim_window, self.ssim_sigma = data_range, ssim_window, ssim_sigma
        self.allow_empty_masks = allow_empty_masks
        f64, i64 = torch.float64, torch.int64
        self.add_state("pixels", torch.zeros((), dtype=i64))
        self.add_state("sum_abs", torch.zeros((), dtype=f64))
        self.add_state("sum_sq", torch.zeros((), dtype=f64))
        self.add_state("ssim_sum", torch.zeros((), dtype=f64))
        self.add_state("ssim_count", torch.zeros((), dtype=i64))
        self.add_state("grad_sum", torch.zeros((), dtype=f64))
        self.add_state("grad_count", torch.zeros((), dtype=i64))
        self.add_state("range_max", torch.zeros((), dtype=f64), reduce="max")
        self.add_state("range_min", torch.full((), math.inf, dtype=f64), reduce="min")
        self.add_state("nonfinite_pred_pixels", torch.zeros((), dtype=i64))
        self.conventions = {
            "pooling": "pixel-pooled over GT-mask pixels of the whole dataset; channel-averaged errors",
            "resize": "pred bilinear (align_corners=False) to GT size",
            "data_range": "255 if GT max > 1.5 else 1 (per sample; mixed ranges are an error)"
            if data_range == "auto"
            else float(data_range),
            "psnr": "10 log10(R^2 / dataset-level masked MSE)",
            "ssim": f"masked Gaussian window {ssim_window}x{ssim_window}, sigma {ssim_sigma}, mask-weighted "
            "moments, windows with mask support > 0.5, averaged over windows and channels, C1=(0.01R)^2, "
            "C2=(0.03R)^2",
            "grad_l1": "forward differences (x and y) with both pixels valid, averaged over pairs, channels",
            "nonfinite_predictions": "pixels with NaN/Inf predictions are excluded and counted in "
            "nonfinite_pred_pixels",
            "mask": "GT mask > 0.5",
        }

    def batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        """Per-sample statistics.

        Args:
            pred: B x C x h x w predicted albedo (resized to the GT size).
            gt: B x C x H x W GT albedo in [0, 1] or [0, 255].
            mask: B x H x W (or B x 1 x H x W) GT mask.
        """
        pred, gt, bad, valid = prepare_dense_batch(pred, gt, mask, "albedo", None, self.allow_empty_masks)
        b, c = gt.shape[:2]
        if not torch.isfinite(gt).all():
            raise ValueError("gt_albedo: contains NaN or Inf values")
        pred = torch.where(torch.isfinite(pred), pred, torch.zeros_like(pred))
        if self.data_range == "auto":
            rng = torch.where(gt.flatten(1).amax(1) > 1.5, 255.0, 1.0).to(torch.float64)
        else:
            rng = torch.full((b,), float(self.data_range), dtype=torch.float64, device=gt.device)
        d = (pred - gt).to(torch.float64)
        vf = valid.to(torch.float64)
        ssim, win_ok = masked_ssim_map(pred, gt, valid, rng, self.ssim_window, self.ssim_sigma)
        win_ok = win_ok & valid
        gx = (d[..., :, 1:] - d[..., :, :-1]).abs()
        gy = (d[..., 1:, :] - d[..., :-1, :]).abs()
        vx = (valid[..., :, 1:] & valid[..., :, :-1])[:, None]
        vy = (valid[..., 1:, :] & valid[..., :-1, :])[:, None]
        return {
            "pixels": valid.flatten(1).sum(1),
            "sum_abs": (d.abs().mean(1) * vf).flatten(1).sum(1),
            "sum_sq": ((d * d).mean(1) * vf).flatten(1).sum(1),
            "ssim_sum": (ssim * win_ok[:, None]).flatten(1).sum(1),
            "ssim_count": win_ok.flatten(1).sum(1) * c,
            "grad_sum": (gx * vx).flatten(1).sum(1) + (gy * vy).flatten(1).sum(1),
            "grad_count": (vx.flatten(1).sum(1) + vy.flatten(1).sum(1)) * c,
            "range_max": rng,
            "range_min": rng,
            "nonfinite_pred_pixels": bad.flatten(1).sum(1),
        }

    def compute_from_state(self, s: dict[str, torch.Tensor]) -> dict:
        n = require_valid_pixels(s, "AlbedoEvaluator")
        r_max, r_min = float(s["range_max"]), float(s["range_min"])
        if r_max != r_min:
            raise ValueError(
                f"AlbedoEvaluator: GT data ranges differ across samples ({r_min:g} and {r_max:g})"
            )
        mse = float(s["sum_sq"]) / n
        return {
            "mae": float(s["sum_abs"]) / n,
            "rmse": math.sqrt(mse),
            "psnr": 10.0 * math.log10(r_max**2 / mse) if mse > 0 else math.inf,
            "ssim": float(s["ssim_sum"]) / int(s["ssim_count"]) if int(s["ssim_count"]) else math.nan,
            "grad_l1": float(s["grad_sum"]) / int(s["grad_count"]) if int(s["grad_count"]) else math.nan,
            "data_range": r_max,
            "num_pixels": float(n),
            "nonfinite_pred_pixels": float(s["nonfinite_pred_pixels"]),
        }
