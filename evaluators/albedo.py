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

import numpy as np
import torch

from evaluators.base import Evaluator
from evaluators.dense_common import (
    chan_dot,
    chan_sum,
    masked_count,
    masked_sum,
    prepare_dense_batch,
    require_valid_pixels,
)
from evaluators.filters import gaussian_blur, gaussian_window
from evaluators.metric_decl import MetricDecl, count_decl
from evaluators.registry import EVALUATORS

__all__ = ["AlbedoEvaluator", "gaussian_window", "masked_ssim_map"]


def masked_ssim_map(
    pred: torch.Tensor,
    gt: torch.Tensor,
    mask: torch.Tensor,
    data_range,
    size: int = 11,
    sigma: float = 1.5,
    dtype=torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked Gaussian-window SSIM map.

    Local moments are Gaussian blurs (OpenCV/SciPy on CPU, see :mod:`evaluators.filters`) of the
    data centred on its per-sample, per-channel masked GT mean: variances and covariances are
    shift-invariant, and centring keeps ``E[x^2] - E[x]^2`` accurate in float32 (the means are
    shifted back before the luminance term). ``dtype=torch.float64`` gives the reference.

    Args:
        pred, gt: B x C x H x W images.
        mask: B x H x W bool.
        data_range: scalar or B tensor (``R``).
        size, sigma: Gaussian window.
        dtype: working precision.

    Returns:
        (ssim B x C x H x W in ``dtype``, window_valid B x H x W bool: mask support > 0.5).
    """
    g = gaussian_window(size, sigma, torch.float64)
    m = mask[:, None].to(dtype)
    cnt = m.flatten(2).sum(2).clamp_min(1.0)
    centre = ((gt.to(dtype) * m).flatten(2).sum(2) / cnt)[..., None, None]  # B x C x 1 x 1
    x = (pred.to(dtype) - centre).mul_(m)
    y = (gt.to(dtype) - centre).mul_(m)
    support = gaussian_blur(m, g)
    inv = 1.0 / support.clamp_min(1e-12)
    mu_x, mu_y = gaussian_blur(x, g).mul_(inv), gaussian_blur(y, g).mul_(inv)
    var_x = gaussian_blur(x * x, g).mul_(inv).sub_(mu_x * mu_x)
    var_y = gaussian_blur(y * y, g).mul_(inv).sub_(mu_y * mu_y)
    cov = gaussian_blur(x * y, g).mul_(inv).sub_(mu_x * mu_y)
    mu_x.add_(centre)
    mu_y.add_(centre)
    r = torch.as_tensor(data_range, dtype=torch.float64, device=pred.device).reshape(-1, 1, 1, 1).to(dtype)
    c1, c2 = (0.01 * r) ** 2, (0.03 * r) ** 2
    mxy = mu_x * mu_y
    num = (2 * mxy + c1).mul_(cov.mul_(2).add_(c2))
    den = (mu_x.mul_(mu_x).add_(mu_y.mul_(mu_y)).add_(c1)).mul_(var_x.add_(var_y).add_(c2))
    return num.div_(den), support[:, 0] > 0.5


@EVALUATORS.register_module()
class AlbedoEvaluator(Evaluator):
    """Streaming albedo evaluator.

    Args:
        data_range: ``"auto"`` (255 if the GT max > 1.5, else 1, per sample) or a fixed number.
        ssim_window: Gaussian window size; ``ssim_sigma``: its sigma.
        allow_empty_masks: skip samples whose mask is empty instead of raising.
    """

    task = "albedo"
    metrics = (
        MetricDecl("mae", "MAE % of range", False, "data range", 100.0, bootstrapped=True, interval=True,
                   headline_ok=True),
        MetricDecl("rmse", "RMSE % of range", False, "data range", 100.0, bootstrapped=True, interval=True),
        MetricDecl("psnr", "PSNR dB", True, "dB", bootstrapped=True, interval=True, headline_ok=True),
        MetricDecl("ssim", "SSIM", True, bootstrapped=True),
        MetricDecl("grad_l1", "Grad-L1 % of range", False, "data range", 100.0, bootstrapped=True),
        count_decl("data_range", unit="data range"),
        count_decl("num_pixels"),
        count_decl("nonfinite_pred_pixels"),
        count_decl("nonfinite_gt_pixels"),
    )

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
        self.add_state("nonfinite_gt_pixels", torch.zeros((), dtype=i64))
        self.bootstrap_states = tuple(k for k, op in self._reduce.items() if op == "sum")
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
            "precision": "MAE/RMSE/PSNR from float64 errors; SSIM in float32 on data centred on the "
            "masked GT mean (moments shift-invariant), sums in float64",
            "nonfinite_predictions": "mask pixels with a NaN/Inf prediction are failures in mae, rmse and "
            "psnr, scored as the value in [0, R] farthest from the GT (0 or R); left out of SSIM windows "
            "and gradient pairs; counted in nonfinite_pred_pixels",
            "nonfinite_gt": "GT pixels with NaN/Inf leave the mask and are counted in nonfinite_gt_pixels",
            "mask": "GT mask > 0.5, without non-finite GT pixels",
        }

    def batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        """Per-sample statistics.

        Args:
            pred: B x C x h x w (or B x h x w x C, C 1 or 3) predicted albedo, resized to the GT size;
                one unbatched sample is accepted with an H x W mask.
            gt: B x C x H x W GT albedo in [0, 1] or [0, 255].
            mask: B x H x W (or B x 1 x H x W) GT mask.
        """
        db = prepare_dense_batch(pred, gt, mask, "albedo", None, self.allow_empty_masks)
        pred, gt, valid, sc = db.pred, db.gt, db.valid, db.scored
        b, c = gt.shape[:2]
        if self.data_range == "auto":
            rng = torch.where(gt.flatten(1).amax(1) > 1.5, 255.0, 1.0).to(torch.float64)
        else:
            rng = torch.full((b,), float(self.data_range), dtype=torch.float64, device=gt.device)
        if db.pred_nonfinite is not None:  # failure: the value farthest from the GT within [0, R]
            r = rng.to(gt.dtype)[:, None, None, None]
            worst = torch.where(gt < r / 2, r, torch.zeros((), dtype=gt.dtype))
            pred = torch.where(db.bad[:, None], worst, pred)
        d = pred - gt
        ssim, win_ok = masked_ssim_map(pred, gt, valid, rng, self.ssim_window, self.ssim_sigma)
        win_ok = win_ok & valid
        gx = chan_sum((d[..., :, 1:] - d[..., :, :-1]).abs_())
        gy = chan_sum((d[..., 1:, :] - d[..., :-1, :]).abs_())
        vx = valid[..., :, 1:] & valid[..., :, :-1]
        vy = valid[..., 1:, :] & valid[..., :-1, :]
        rows = db.counts()
        d64 = pred.to(torch.float64) - gt.to(torch.float64)  # PSNR keeps float64 squared errors
        rows.update(
            sum_abs=masked_sum(chan_sum(d64.abs()) / c, sc),
            sum_sq=masked_sum(chan_dot(d64, d64) / c, sc),
            ssim_sum=masked_sum(chan_sum(ssim), win_ok),
            ssim_count=win_ok.flatten(1).sum(1) * c,
            grad_sum=masked_sum(gx, vx) + masked_sum(gy, vy),
            grad_count=(masked_count(vx, vx) + masked_count(vy, vy)) * c,
            range_max=rng,
            range_min=rng,
        )
        return rows

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
            "nonfinite_gt_pixels": float(s["nonfinite_gt_pixels"]),
        }

    def _bootstrap_values(self, s: dict[str, np.ndarray], keys: list[str]) -> dict[str, np.ndarray]:
        """MAE, RMSE, PSNR (the dataset's data range), SSIM and gradient L1 of resampled states."""
        n = s["pixels"]
        with np.errstate(divide="ignore", invalid="ignore"):
            mse = np.where(n > 0, s["sum_sq"] / n, np.nan)
            r = s["range_max"]
            out = {
                "mae": np.where(n > 0, s["sum_abs"] / n, np.nan),
                "rmse": np.sqrt(mse),
                "psnr": np.where(mse > 0, 10.0 * np.log10(r**2 / mse), np.where(mse == 0, np.inf, np.nan)),
                "ssim": np.where(s["ssim_count"] > 0, s["ssim_sum"] / s["ssim_count"], np.nan),
                "grad_l1": np.where(s["grad_count"] > 0, s["grad_sum"] / s["grad_count"], np.nan),
            }
        return {k: out[k] for k in keys}
