"""Surface-normal metrics (official ``normal_evaluator`` definitions), pixel-pooled over GT masks.

The prediction is resized bilinearly (align_corners=False) to the GT size, both maps are
L2-normalised, the angle is ``acos(clamp(dot, -1, 1))`` in degrees (computed as
``atan2(|p x g|, p . g)``, the same angle without float32 acos's error near 0), and every metric
pools the pixels of the whole dataset (each GT-mask pixel weighs the same).

Medians. ``normal_median_deg`` is the official one: the centre of the first 0.5-degree histogram bin
whose cumulative count reaches half of the pixels. ``normal_median_exact_deg`` is the sample median
(the mean of the two middle values for an even count) of the angles quantised to a fixed
0.001-degree grid: a mergeable histogram of 180,001 int64 counts (1.4 MB, whatever the dataset
size), so it is exact for the quantised angles and within 0.0005 degrees of the median of the
float angles, far below the 0.01-degree printing precision. A truly exact median of float angles
would need every angle kept (memory growing with the dataset), which the streaming design rules out.

Example:
    >>> import torch
    >>> gt = torch.zeros(1, 3, 4, 4); gt[:, 2] = 1
    >>> ev = NormalEvaluator()
    >>> ev.update(gt.clone(), gt, torch.ones(1, 4, 4, dtype=torch.bool), index=[0])
    >>> r = ev.compute()
    >>> r["normal_mae"], r["within_11_25_deg"]
    (0.0, 100.0)
"""

from __future__ import annotations

import math

import numpy as np
import torch

from evaluators.base import Evaluator
from evaluators.dense_common import (
    angle_key,
    count_below,
    normalize,
    prepare_dense_batch,
    require_valid_pixels,
    single_thread,
    unit_angle_deg,
)
from evaluators.metric_decl import FieldValue, MetricDecl, count_decl
from evaluators.registry import EVALUATORS

OFFICIAL_BIN_DEG = 0.5
FINE_BIN_DEG = 0.001
DEFAULT_THRESHOLDS = (5.0, 11.25, 22.5, 30.0)


def angular_error_deg(pred: torch.Tensor, gt: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Angle in degrees between two B x 3 x H x W normal maps (both L2-normalised first).

    Example:
        >>> a = torch.tensor([1., 0., 0.]).view(1, 3, 1, 1)
        >>> b = torch.tensor([0., 2., 0.]).view(1, 3, 1, 1)
        >>> angular_error_deg(a, b).item()
        90.0
    """
    return unit_angle_deg(normalize(pred, eps), normalize(gt, eps))


def rows_bins(bin_deg: float) -> int:
    """Number of ``bin_deg`` bins covering [0, 180] degrees."""
    return int(round(180.0 / bin_deg))


def histogram_bin_centre_median(hist: torch.Tensor, bin_deg: float) -> float:
    """Official median: centre of the first bin whose cumulative count reaches half the total.

    Example:
        >>> histogram_bin_centre_median(torch.tensor([1, 1, 3, 0]), 0.5)
        1.25
    """
    total = int(hist.sum())
    if total == 0:
        return math.nan
    cdf = hist.cumsum(0).to(torch.float64)
    i = int((cdf >= total / 2.0).nonzero()[0])
    return (i + 0.5) * bin_deg


def quantised_median(counts: torch.Tensor, step: float) -> float:
    """Exact sample median of values ``k * step`` held as counts per k (mean of the middle two).

    Example:
        >>> quantised_median(torch.tensor([1, 0, 2, 1]), 1.0)  # values 0, 2, 2, 3
        2.0
    """
    total = int(counts.sum())
    if total == 0:
        return math.nan
    cdf = counts.cumsum(0)
    lo = int((cdf >= (total - 1) // 2 + 1).nonzero()[0])  # k of order statistic (total-1)//2 (0-based)
    hi = int((cdf >= total // 2 + 1).nonzero()[0])
    return 0.5 * (lo + hi) * step


@EVALUATORS.register_module()
class NormalEvaluator(Evaluator):
    """Streaming surface-normal evaluator.

    Args:
        angle_thresholds: ``within_*`` thresholds in degrees (strict ``angle < t``), reported in percent.
        hist_bin_size_deg: bin width of the official histogram median (0.5).
        allow_empty_masks: skip samples whose mask is empty instead of raising.
        exact_median: also keep the 0.001-degree histogram for ``normal_median_exact_deg`` (an
            extra, on by default; its cost is a 180,001-bin bincount per sample and 1.4 MB of
            per-sample state in the dedup tail; the official median does not need it).
    """

    task = "normal"
    bootstrap_states = ("pixels", "sum_angle", "sum_angle_sq", "within", "hist_official")
    metrics = (
        MetricDecl("normal_mae", "mean deg", False, "deg", bootstrapped=True, interval=True,
                   headline_ok=True),
        MetricDecl("normal_median_deg", "median deg", False, "deg", bootstrapped=True, interval=True,
                   headline_ok=True, note=(
                       "median deg is the official median: the centre of the first 0.5-degree histogram bin "
                       "holding half the pixels. It moves in 0.5-degree steps and is at least 0.25 degrees "
                       "even for exact predictions (so the oracle's median can exceed its mean by far); "
                       "median (exact) deg is the sample median.")),
        MetricDecl("normal_median_exact_deg", "median (exact) deg", False, "deg", requires="exact_median"),
        MetricDecl("normal_rmse", "RMSE deg", False, "deg", bootstrapped=True),
        MetricDecl("{t.key}", "<{t.label} deg %", True, "%", bootstrapped=True),
        count_decl("num_pixels"),
        count_decl("nonfinite_pred_pixels"),
        count_decl("nonfinite_gt_pixels"),
    )

    def __init__(
        self,
        angle_thresholds=DEFAULT_THRESHOLDS,
        hist_bin_size_deg: float = OFFICIAL_BIN_DEG,
        allow_empty_masks: bool = False,
        exact_median: bool = True,
    ) -> None:
        super().__init__()
        self.exact_median = bool(exact_median)
        self.thresholds = tuple(float(t) for t in angle_thresholds)
        self.allow_empty_masks = allow_empty_masks
        self.bin_deg = float(hist_bin_size_deg)
        n_off = int(round(180.0 / self.bin_deg))
        n_fine = int(round(180.0 / FINE_BIN_DEG)) + 1
        self.add_state("pixels", torch.zeros((), dtype=torch.int64))
        self.add_state("sum_angle", torch.zeros((), dtype=torch.float64))
        self.add_state("sum_angle_sq", torch.zeros((), dtype=torch.float64))
        self.add_state("within", torch.zeros(len(self.thresholds), dtype=torch.int64))
        self.add_state("hist_official", torch.zeros(n_off, dtype=torch.int64))
        if self.exact_median:
            self.add_state("hist_fine", torch.zeros(n_fine, dtype=torch.int64))
        self.add_state("nonfinite_pred_pixels", torch.zeros((), dtype=torch.int64))
        self.add_state("nonfinite_gt_pixels", torch.zeros((), dtype=torch.int64))
        self.conventions = {
            "pooling": "pixel-pooled over GT-mask pixels of the whole dataset",
            "angle": "acos(clamp(dot(normalize(pred), normalize(gt)), -1, 1)) in degrees",
            "resize": "pred bilinear (align_corners=False) to GT size before normalising",
            "thresholds_deg": list(self.thresholds),
            "within_units": "percent, strict angle < t",
            "normal_median_deg": f"official: centre of the first {self.bin_deg:g}-deg histogram bin reaching "
            "half the pixels",
            "normal_median_exact_deg": "median of angles quantised to 0.001 deg (|err| <= 0.0005 deg)"
            if self.exact_median
            else "not computed (exact_median=False)",
            "nonfinite_predictions": "mask pixels with a NaN/Inf prediction are failures scored as 180 deg "
            "(in every metric) and counted in nonfinite_pred_pixels",
            "nonfinite_gt": "GT pixels with NaN/Inf leave the mask and are counted in nonfinite_gt_pixels",
            "mask": "GT mask > 0.5, without non-finite GT pixels",
        }

    def metric_fields(self) -> dict[str, tuple[FieldValue, ...]]:
        """``t``: the ``within_*`` thresholds."""
        return {"t": tuple(FieldValue(angle_key(t), f"{t:g}") for t in self.thresholds)}

    def batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        """Per-sample statistics (dense per-pixel maps, reduced per sample; no pixel gathering).

        Args:
            pred: B x 3 x h x w (or B x h x w x 3) predicted normals, any length; resized to the GT
                size. One unbatched sample (3 x H x W or H x W x 3) is accepted with an H x W mask.
            gt: B x 3 x H x W (or B x H x W x 3) GT normals.
            mask: B x H x W (or B x 1 x H x W) GT mask (bool or > 0.5).
        """
        db = prepare_dense_batch(pred, gt, mask, "normal", 3, self.allow_empty_masks)
        with single_thread(db.gt.device):
            per = [self._sample_rows(i, db) for i in range(db.gt.shape[0])]
        rows = db.counts()
        for k in per[0]:
            rows[k] = torch.stack([r[k] for r in per])
        return rows

    def _sample_rows(self, i: int, db) -> dict[str, torch.Tensor]:
        """Statistics of sample ``i`` from its scored pixels, gathered once into 3 x N arrays."""
        f64 = torch.float64
        idx = db.scored[i].flatten().nonzero().squeeze(1)
        p = db.pred[i].reshape(3, -1).index_select(1, idx)[:, None]  # 3 x 1 x N: "B x C x pixels"
        g = db.gt[i].reshape(3, -1).index_select(1, idx)[:, None]
        ang = angular_error_deg(p.transpose(0, 1), g.transpose(0, 1))[0]
        if db.pred_nonfinite is not None:  # a missing prediction is the worst possible angle
            failed = db.bad[i].flatten().index_select(0, idx)
            ang = torch.where(failed, torch.full((), 180.0, dtype=ang.dtype), ang)
        a64 = ang.to(f64)
        n_off = rows_bins(self.bin_deg)
        rows = {
            "sum_angle": a64.sum(),
            "sum_angle_sq": (a64 * a64).sum(),
            "within": count_below(ang, self.thresholds),
            "hist_official": torch.bincount(
                torch.floor(a64 / self.bin_deg).long().clamp_(0, n_off - 1), minlength=n_off
            ),
        }
        if self.exact_median:
            n_fine = rows_bins(FINE_BIN_DEG) + 1
            q = torch.round(a64 / FINE_BIN_DEG).long().clamp_(0, n_fine - 1)
            rows["hist_fine"] = torch.bincount(q, minlength=n_fine)
        return rows

    def compute_from_state(self, s: dict[str, torch.Tensor]) -> dict:
        n = require_valid_pixels(s, "NormalEvaluator")
        out = {
            "normal_mae": float(s["sum_angle"]) / n,
            "normal_median_deg": histogram_bin_centre_median(s["hist_official"], self.bin_deg),
            "normal_rmse": math.sqrt(float(s["sum_angle_sq"]) / n),
        }
        if self.exact_median:
            out["normal_median_exact_deg"] = quantised_median(s["hist_fine"], FINE_BIN_DEG)
        for t, c in zip(self.thresholds, s["within"].tolist()):
            out[angle_key(t)] = 100.0 * c / n
        out["num_pixels"] = float(n)
        out["nonfinite_pred_pixels"] = float(s["nonfinite_pred_pixels"])
        out["nonfinite_gt_pixels"] = float(s["nonfinite_gt_pixels"])
        return out

    def _bootstrap_values(self, s: dict[str, np.ndarray], keys: list[str]) -> dict[str, np.ndarray]:
        """Mean, RMSE, official histogram median and ``within_*`` of ``R x ...`` resampled states."""
        n = s["pixels"]
        with np.errstate(divide="ignore", invalid="ignore"):
            nn = np.where(n > 0, n, np.nan)
            out = {"normal_mae": s["sum_angle"] / nn, "normal_rmse": np.sqrt(s["sum_angle_sq"] / nn)}
            for j, t in enumerate(self.thresholds):
                out[angle_key(t)] = 100.0 * s["within"][:, j] / nn
        cdf = np.cumsum(s["hist_official"], axis=1)
        first = np.argmax(cdf >= (cdf[:, -1] / 2.0)[:, None], axis=1)
        out["normal_median_deg"] = np.where(cdf[:, -1] > 0, (first + 0.5) * self.bin_deg, np.nan)
        return {k: out[k] for k in keys}
