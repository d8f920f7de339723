"""Pointmap metrics: the official ``pointmap_evaluator`` keys, raw and after per-image alignment.

Raw keys (official, pixel-pooled over GT-mask pixels, distances in the pointmap's unit, metres):
``l2_mean``, ``rmse``, ``x_mae``/``y_mae``/``z_mae``, ``within_05_cm``/``within_10_cm``/``within_20_cm``
(fractions, strict ``l2 < t``), and from normals of each pointmap (5x5 Sobel derivatives as
OpenCV's ``Sobel(ksize=5)`` with reflect-101 borders, ``n = cross(dP/dx, dP/dy) / (|n| + 1e-6)``):
``normal_mae``, ``normal_rmse``, ``within_*_deg`` (fractions). Extra MoGe-style keys: ``rel_point_err``
(mean of ``|p - g| / |g|``) and ``delta_1.25`` (fraction of pixels with relative error < 0.25).

Aligned keys repeat the distance metrics under the prefixes ``scale_aligned.`` (the paper's
"we optimize for scale") and, with ``shift_aligned=True``, ``scale_shift_aligned.``, after
aligning each image's prediction to its GT with the closed-form L2 least-squares solver named
in the conventions (``lstsq_l2``): ``s = sum<p, g> / sum<p, p>``, or with a 3-D shift
``s = sum<p - p_mean, g - g_mean> / sum|p - p_mean|^2``, ``t = g_mean - s * p_mean`` (sums over
the image's valid pixels). Normals are invariant to a positive
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

import numpy as np
import torch

from evaluators.base import Evaluator
from evaluators.dense_common import (
    angle_key,
    count_below,
    dilate,
    flat_nonzero,
    prepare_dense_batch,
    require_valid_pixels,
    row_sums_f64,
    single_thread,
    take_columns,
)
from evaluators.metric_decl import FieldValue, MetricDecl, count_decl
from evaluators.pointmap_geometry import (  # noqa: F401 - sobel5_kernels, pointmap_normals: re-exported
    cross3,
    dot3,
    norm3,
    normal_angle_deg,
    pointmap_normals,
    sobel5,
    sobel5_kernels,
)
from evaluators.registry import EVALUATORS

DEFAULT_DISTANCES = (0.05, 0.1, 0.2)
DEFAULT_ANGLES = (5.0, 11.25, 22.5, 30.0)
VARIANTS = ("", "scale_aligned.", "scale_shift_aligned.")
SOLVER = "lstsq_l2"


@EVALUATORS.register_module()
class PointmapEvaluator(Evaluator):
    """Streaming pointmap evaluator (raw, scale-aligned and scale-and-shift-aligned).

    Args:
        distance_thresholds: ``within_XX_cm`` thresholds in the pointmap's unit (metres).
        angle_thresholds: ``within_*_deg`` thresholds for the Sobel normals (fractions).
        allow_empty_masks: skip samples whose mask is empty instead of raising.
        aligned: also report the ``scale_aligned.`` keys (the paper's protocol; on by default).
        shift_aligned: also report the ``scale_shift_aligned.`` keys (an extra, off by default;
            measured 1.2-1.7x the default's CPU time per sample, see docs/evaluators.md).
    """

    task = "pointmap"
    # distances in the pointmap's unit (metres, the canonical focal-768 frame too) shown x100: centimetres;
    # ``{v.key}``: the alignment variants (``scale_aligned.``, ``scale_shift_aligned.``) the settings enable
    metrics = (
        MetricDecl("l2_mean", "L2 cm", False, "length", 100.0, bootstrapped=True, interval=True,
                   headline_ok=True),
        MetricDecl("rmse", "RMSE cm", False, "length", 100.0, bootstrapped=True, interval=True,
                   headline_ok=True),
        MetricDecl("{a.key}_mae", "{a.label} abs cm", False, "length", 100.0, bootstrapped=True),
        MetricDecl("{d.key}", "<{d.label} cm %", True, "fraction", 100.0, bootstrapped=True,
                   shown=("within_10_cm",)),
        MetricDecl("rel_point_err", "rel. err", False, bootstrapped=True, shown=False),
        MetricDecl("delta_1.25", "delta_1.25 %", True, "fraction", 100.0, bootstrapped=True, shown=False),
        MetricDecl("normal_mae", "normal mean deg", False, "deg", bootstrapped=True),
        MetricDecl("normal_rmse", "normal RMSE deg", False, "deg", bootstrapped=True, shown=False),
        MetricDecl("{t.key}", "normal <{t.label} deg %", True, "fraction", 100.0, bootstrapped=True,
                   shown=False),
        MetricDecl("{v.key}l2_mean", "L2 {v.label} cm", False, "length", 100.0, bootstrapped=True,
                   shown=("scale_aligned.*",)),
        MetricDecl("{v.key}rmse", "RMSE {v.label} cm", False, "length", 100.0, bootstrapped=True,
                   shown=False),
        MetricDecl("{v.key}{a.key}_mae", "{a.label} abs {v.label} cm", False, "length", 100.0,
                   bootstrapped=True, shown=False),
        MetricDecl("{v.key}{d.key}", "<{d.label} cm {v.label} %", True, "fraction", 100.0, bootstrapped=True,
                   shown=False),
        MetricDecl("{v.key}rel_point_err", "rel. err {v.label}", False, bootstrapped=True,
                   shown=("scale_aligned.*",)),
        MetricDecl("{v.key}delta_1.25", "delta_1.25 {v.label} %", True, "fraction", 100.0, bootstrapped=True,
                   shown=False),
        count_decl("num_pixels"),
        count_decl("nonfinite_pred_pixels"),
        count_decl("nonfinite_gt_pixels"),
    )

    def __init__(
        self,
        distance_thresholds=DEFAULT_DISTANCES,
        angle_thresholds=DEFAULT_ANGLES,
        allow_empty_masks: bool = False,
        aligned: bool = True,
        shift_aligned: bool = False,
    ) -> None:
        super().__init__()
        self.aligned, self.shift_aligned = bool(aligned), bool(aligned and shift_aligned)
        self.variants = tuple(v for v, on in zip(VARIANTS, (True, self.aligned, self.shift_aligned)) if on)
        self.dist_thr = tuple(float(t) for t in distance_thresholds)
        self.ang_thr = tuple(float(t) for t in angle_thresholds)
        self.allow_empty_masks = allow_empty_masks
        f64, i64 = torch.float64, torch.int64
        self.add_state("pixels", torch.zeros((), dtype=i64))
        self.add_state("nonfinite_pred_pixels", torch.zeros((), dtype=i64))
        self.add_state("nonfinite_gt_pixels", torch.zeros((), dtype=i64))
        for v in self.variants:
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
        self.bootstrap_states = tuple(self._reduce)
        self.conventions = {
            "pooling": "pixel-pooled over GT-mask pixels of the whole dataset",
            "resize": "pred bilinear (align_corners=False) to GT size",
            "distance_thresholds": list(self.dist_thr),
            "angle_thresholds_deg": list(self.ang_thr),
            "within_units": "fractions, strict < t",
            "normals": "OpenCV-equivalent 5x5 Sobel (reflect-101 border), cross(d/dx, d/dy)/(|n|+1e-6), "
            "angle acos(clamp(dot)) over mask pixels whose 5x5 GT neighbourhood is finite",
            "alignment_solver": SOLVER,
            "alignment": "per image over valid pixels: scale s=<p,g>/<p,p>; scale+shift: centred least "
            "squares with a 3-D shift; normal metrics are alignment-invariant and not repeated",
            "rel_point_err": "MoGe-style mean |p-g|/|g|; delta_1.25 = fraction with |p-g|/|g| < 0.25",
            "variants": [v.rstrip(".") or "raw" for v in self.variants],
            "precision": "per-pixel float32 (the input's precision); sums of float32 blocks of 1024 "
            "pixels accumulated in float64; alignment coefficients in float64",
            "nonfinite_predictions": "mask pixels with a NaN/Inf prediction are failures: scored as a "
            "prediction at the origin (0, 0, 0) (after alignment: at the fitted shift), left out of the "
            "alignment fit, and their normals (5x5 neighbourhood) scored as 180 deg; counted in "
            "nonfinite_pred_pixels",
            "nonfinite_gt": "GT pixels with NaN/Inf leave the mask and are counted in nonfinite_gt_pixels; "
            "normal metrics also leave out mask pixels within 2 px of a non-finite GT pixel",
            "mask": "GT mask > 0.5, without non-finite GT pixels",
        }

    def metric_fields(self) -> dict[str, tuple[FieldValue, ...]]:
        """``a``: the axes, ``d``/``t``: the distance/angle thresholds, ``v``: the enabled alignments."""
        return {
            "a": tuple(FieldValue(a, a.upper()) for a in "xyz"),
            "d": tuple(FieldValue(f"within_{round(t * 100):02d}_cm", f"{round(t * 100, 6):g}")
                       for t in self.dist_thr),
            "t": tuple(FieldValue(angle_key(t), f"{t:g}") for t in self.ang_thr),
            "v": tuple(FieldValue(v, v.rstrip(".").replace("_", "-")) for v in self.variants if v),
        }

    def _distance_rows(self, buf: torch.Tensor, gnorm: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-pixel rows of one sample and variant, in place in the 6 x N ``buf`` whose rows 3-5 hold
        the errors ``p - g``: afterwards l2, l2^2, l2 / |g|, |dx|, |dy|, |dz| (summed later in one go);
        returns the threshold counts."""
        d = buf[3:6]
        torch.sqrt(dot3(d, d, out=buf[1]), out=buf[0])
        torch.div(buf[0], gnorm, out=buf[2])
        d.abs_()
        return {"within_dist": count_below(buf[0], self.dist_thr), "delta": count_below(buf[2], (0.25,))[0]}

    def _sample_rows(self, i: int, db, derivs: tuple, nmask: torch.Tensor) -> dict[str, torch.Tensor]:
        """All statistics of sample ``i`` on its scored pixels gathered into compact arrays.

        Every variant's per-pixel distance rows go into one buffer reduced once (float32 blocks,
        float64 accumulation, :func:`row_sums_f64`); the alignment sums are reduced the same way.
        """
        idx = flat_nonzero(db.scored[i])
        p, g = take_columns(db.pred[i], idx), take_columns(db.gt[i], idx)
        fit = None if db.pred_nonfinite is None else db.valid[i].flatten().index_select(0, idx)
        gnorm = norm3(g).clamp_min_(1e-12)
        buf = p.new_empty(6 * len(self.variants), p.shape[1])
        blocks = dict(zip(self.variants, buf.split(6)))
        torch.sub(p, g, out=blocks[""][3:6])
        counts = {"": self._distance_rows(blocks[""], gnorm)}
        if self.aligned:
            pf = p if fit is None else p * fit
            two = p.new_empty(2, p.shape[1])
            dot3(pf, g, out=two[0]), dot3(pf, pf, out=two[1])
            num, den = row_sums_f64(two).tolist()
            sc = num / den if den > 0 else 1.0
            blk = blocks["scale_aligned."]
            torch.mul(p, sc, out=blk[3:6]).sub_(g)
            counts["scale_aligned."] = self._distance_rows(blk, gnorm)
            if self.shift_aligned:
                blk = blocks["scale_shift_aligned."]
                self._shift_fit(p, g, pf, fit, two, blk[3:6])
                counts["scale_shift_aligned."] = self._distance_rows(blk, gnorm)
        sums = row_sums_f64(buf)
        rows: dict[str, torch.Tensor] = {}
        for j, v in enumerate(self.variants):
            s6 = sums[6 * j : 6 * j + 6]
            rows.update({v + "sum_l2": s6[0], v + "sum_sq": s6[1], v + "sum_rel": s6[2]})
            rows[v + "sum_abs"] = s6[3:6]
            rows.update({v + k: c for k, c in counts[v].items()})
        nidx = idx if nmask is db.scored else flat_nonzero(nmask[i])
        ang2 = p.new_empty(2, nidx.numel())
        ang = self._normal_angles(i, derivs, nidx, out=ang2[0])
        if db.pred_nonfinite is not None:  # a spoilt predicted 5x5 neighbourhood is a failure (180 deg)
            spoilt = dilate(db.pred_nonfinite[i : i + 1], 5)[0].flatten().index_select(0, nidx)
            ang.masked_fill_(spoilt, 180.0)
        torch.mul(ang, ang, out=ang2[1])
        rows["normal_pixels"] = torch.tensor(nidx.numel())
        rows["sum_angle"], rows["sum_angle_sq"] = row_sums_f64(ang2)
        rows["within_angle"] = count_below(ang, self.ang_thr)
        return rows

    @staticmethod
    def _normal_angles(i: int, derivs: tuple, nidx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Normal angles of sample ``i`` at the flat pixel indices ``nidx``, written to ``out``.

        Equal results either way; the cheaper order is chosen: with more than half of the image to
        score, the angles are computed on every pixel and one plane is gathered (measured 20-40%
        faster than gathering the 12 derivative planes at 70% coverage), else the derivatives are
        gathered first.
        """
        if 2 * nidx.numel() <= derivs[0][i].numel() // 3:
            pdx, pdy, gdx, gdy = (take_columns(d[i], nidx) for d in derivs)
            return normal_angle_deg(cross3(pdx, pdy), cross3(gdx, gdy), out=out)
        pdx, pdy, gdx, gdy = (d[i].reshape(3, -1) for d in derivs)
        full = normal_angle_deg(cross3(pdx, pdy), cross3(gdx, gdy))
        if full.device.type == "cpu":
            np.take(full.numpy(), nidx.numpy(), out=out.numpy())
            return out
        return torch.index_select(full, 0, nidx, out=out)

    @staticmethod
    def _shift_fit(p, g, pf, fit, two, out) -> None:
        """Scale-and-shift fit (centred least squares, no cancellation); writes ``s p + t - g`` to ``out``
        (a failed pixel sits at the fitted shift ``t``)."""
        n = max(float(pf.shape[1] if fit is None else fit.sum()), 1.0)
        gf = g if fit is None else g * fit
        pm, gm = row_sums_f64(pf) / n, row_sums_f64(gf) / n
        pc = p - pm.to(p.dtype)[:, None]
        gc = g - gm.to(p.dtype)[:, None]
        if fit is not None:
            pc, gc = pc * fit, gc * fit
        dot3(pc, gc, out=two[0]), dot3(pc, pc, out=two[1])
        num, den = row_sums_f64(two).tolist()
        s2 = num / den if den > 0 else 1.0
        t2 = (gm - s2 * pm).to(p.dtype)[:, None]
        torch.mul(p, s2, out=out).add_(t2)
        if fit is not None:
            out.copy_(torch.where(fit[None], out, t2))
        out.sub_(g)

    def batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        """Per-sample statistics, computed on each sample's mask pixels gathered once.

        Args:
            pred: B x 3 x h x w (or B x h x w x 3) predicted pointmap, resized to the GT size; one
                unbatched sample is accepted with an H x W mask.
            gt: B x 3 x H x W (or B x H x W x 3) GT pointmap.
            mask: B x H x W (or B x 1 x H x W) GT mask.
        """
        with torch.no_grad():  # in-place work on compact buffers; never part of a graph
            return self._batch_stats(pred, gt, mask)

    def _batch_stats(self, pred, gt, mask) -> dict[str, torch.Tensor]:
        db = prepare_dense_batch(pred, gt, mask, "pointmap", 3, self.allow_empty_masks)
        dtype = torch.promote_types(db.pred.dtype, db.gt.dtype)
        if dtype in (torch.float16, torch.bfloat16):  # half precision drifts in 25-tap Sobel sums
            dtype = torch.float32
        db.pred, db.gt = db.pred.to(dtype), db.gt.to(dtype)
        nmask = db.scored
        if db.gt_nonfinite is not None:  # GT normals need a finite 5x5 neighbourhood
            nmask = nmask & ~dilate(db.gt_nonfinite, 5)
        derivs = (*sobel5(db.pred), *sobel5(db.gt))  # pred d/dx, d/dy, GT d/dx, d/dy
        with single_thread(db.gt.device):
            per = [self._sample_rows(i, db, derivs, nmask) for i in range(db.gt.shape[0])]
        rows = db.counts()
        for k in per[0]:
            rows[k] = torch.stack([r[k] for r in per])
        return rows

    def compute_from_state(self, s: dict[str, torch.Tensor]) -> dict:
        n = require_valid_pixels(s, "PointmapEvaluator")
        out: dict = {}
        for v in self.variants:
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
        out["nonfinite_gt_pixels"] = float(s["nonfinite_gt_pixels"])
        return out

    def _bootstrap_values(self, s: dict[str, np.ndarray], keys: list[str]) -> dict:
        """``compute_from_state`` on ``R x ...`` resampled states."""
        out: dict = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            n = np.where(s["pixels"] > 0, s["pixels"], np.nan)
            nn = np.where(s["normal_pixels"] > 0, s["normal_pixels"], np.nan)
            for v in self.variants:
                out[v + "l2_mean"] = s[v + "sum_l2"] / n
                for j, a in enumerate("xyz"):
                    out[f"{v}{a}_mae"] = s[v + "sum_abs"][:, j] / n
                out[v + "rmse"] = np.sqrt(s[v + "sum_sq"] / n)
                for j, t in enumerate(self.dist_thr):
                    out[f"{v}within_{round(t * 100):02d}_cm"] = s[v + "within_dist"][:, j] / n
                out[v + "rel_point_err"] = s[v + "sum_rel"] / n
                out[v + "delta_1.25"] = s[v + "delta"] / n
            out["normal_mae"] = s["sum_angle"] / nn
            out["normal_rmse"] = np.sqrt(s["sum_angle_sq"] / nn)
            for j, t in enumerate(self.ang_thr):
                out[angle_key(t)] = s["within_angle"][:, j] / nn
        return {k: out[k] for k in keys}
