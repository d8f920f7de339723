"""The read-out: a per-position train prior plus closed-form ridge regression from the tapped features.

Every feature position predicts its ``R x R`` block of output pixels (``R = ceil(patch / output
stride)``), i.e. a 1x1 conv to ``out * R^2`` channels followed by PixelShuffle(R). The feature-free
floor is nested in it (the penalty search always has the floor itself as a candidate): at position
``p`` the read-out is ``my_p + (x - mx_p) W``, where ``my_p``
is the train mean of the targets at that output pixel (every sub-pixel and channel: the per-pixel
class prior, mean heatmap, mean masked pointmap, ...) and ``mx_p`` the train mean of the features at
that position; ``W`` is shared by all positions and fitted in closed form on the train split
(:mod:`benchmarks.probe.readout.ridge`,
:func:`~benchmarks.probe.readout.ridge.within_positions`; the penalty is
chosen on held-out train images, the infinite penalty, i.e. the floor itself, among the candidates).
Targets are the task's read-out targets (:meth:`ProbeTask.linear_targets`). A masked task (normals,
pointmap, albedo: scored on the GT mask only) regresses its two parts ``A = mask * t`` and ``B = mask``
and predicts ``t = A + mu_p (1 - B)`` with ``mu_p = sum A / sum B`` the train prior at that output pixel
(the mask-weighted mean of ``t``): where the read-out places the mask (``B = 1``) the prediction is
``A``, and the prior fills in what it does not. Both ends hold exactly: at the infinite penalty ``A``
and ``B`` are their per-pixel train means and the prediction is ``mu_p`` (the floor); features that
hold ``mask * t`` and the mask linearly give ``A = mask * t``, ``B = mask``, i.e. ``t`` on every mask
pixel (the ceiling; docs/design/readout_ceiling.md says why this form and not ``mask * (t - mu_p)``
as one target, which a map shared by every position cannot represent). Every statistic is a sum over
rows, accumulated batch by batch. The pixel-shuffle body, when the protocol asks for it, is trained on
what the read-out leaves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from benchmarks.probe.readout.decoders import crop_to_output, padded_size
from benchmarks.probe.readout.ridge import RidgeFit, fit_ridge, within_positions
from benchmarks.probe.readout.ridge_sums import PositionSums, RidgeStats
from benchmarks.probe.readout.shrink import MASKED_FORMS, compose, masked_prior, shrink_toward

if TYPE_CHECKING:
    from benchmarks.probe.features.store import FeatureSet
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.tasks.base import ProbeTask


def shortcut_factor(patch_size: int, output_stride: int) -> int:
    """Output pixels per feature position along each axis: ``ceil(patch / output_stride)`` (>= 1)."""
    return max(1, math.ceil(patch_size / output_stride - 1e-9))


@dataclass(frozen=True)
class ReadoutGeometry:
    """Where a task's read-out outputs sit on a feature grid: the one place the output size is derived.

    Attributes:
        grid: (h, w) feature positions.
        r: output pixels per feature position along each axis (:func:`shortcut_factor`).
        stride: the output stride (the task's, but never coarser than the features').
        out_size: (H_out, W_out) of the unpadded image at ``stride``.
        valid_frac: fraction of the padded grid's height and width that is image.
    """

    grid: tuple[int, int]
    r: int
    stride: int
    out_size: tuple[int, int]
    valid_frac: tuple[float, float]

    @classmethod
    def of(cls, task: ProbeTask, features: FeatureSet, protocol: ProbeProtocol) -> ReadoutGeometry:
        """The geometry of ``task``'s read-out on a :class:`~benchmarks.probe.features.store.FeatureSet`."""
        stride = min(protocol.task(task.name).output_stride, features.patch_size)
        return cls(tuple(features.feats.shape[-2:]), shortcut_factor(features.patch_size, stride), stride,
                   tuple(task.output_size(features.image_size, stride)), tuple(features.valid_frac))


def to_grid(y: torch.Tensor, grid: tuple[int, int], r: int, out_size: tuple[int, int],
            valid_frac: tuple[float, float]) -> torch.Tensor:
    """Output-space maps B x O x H x W -> feature-grid rows layout B x O*r*r x h x w (inverse of
    :func:`from_grid` up to resampling when ``r`` does not divide the padded size)."""
    ph, pw = padded_size(out_size, valid_frac)
    y = y if y.dtype == torch.float64 else y.float()  # float64 sums stay float64
    y = F.pad(y, (0, max(0, pw - y.shape[-1]), 0, max(0, ph - y.shape[-2])))[..., :ph, :pw]
    full = (grid[0] * r, grid[1] * r)
    if (ph, pw) != full:
        y = F.interpolate(y, size=full, mode="bilinear", align_corners=False)
    return F.pixel_unshuffle(y, r)


def from_grid(z: torch.Tensor, r: int, out_size: tuple[int, int],
              valid_frac: tuple[float, float]) -> torch.Tensor:
    """Feature-grid layout B x O*r*r x h x w -> output maps B x O x H_out x W_out (cropped)."""
    return crop_to_output(F.pixel_shuffle(z, r) if r > 1 else z, out_size, valid_frac)


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


class LinearShortcut:
    """A fitted read-out (kept outside the trained module: it is refit, never trained or saved).

    Args:
        fit: spatial ridge fit, C x (out * r^2), or C x ((out + 1) * r^2) for a masked task (its parts
            ``A = mask * t`` and ``B = mask``); its bias is unused when ``bias_map`` is given.
        r: shuffle factor.
        out_channels: output maps.
        bias_map: P x (fitted columns) per-position intercept ``my_p - mx_p W``.
        prior: a masked task's P x (out * r^2) train prior ``mu_p``: the prediction is
            ``A + mu_p (1 - B)``; None: the fitted columns are the prediction.
        shrink: a masked task's ``out`` factors ``s_c``: the prediction is ``mu_p + s_c (A + mu_p (1 - B)
            - mu_p)`` (:mod:`benchmarks.probe.readout.shrink`; None: not shrunk).
    """

    def __init__(self, fit: RidgeFit, r: int, out_channels: int, bias_map: torch.Tensor | None = None,
                 prior: torch.Tensor | None = None, shrink: torch.Tensor | None = None):
        self.fit, self.r, self.out_channels = fit, r, out_channels
        self.in_channels = fit.weight.shape[0]
        self.bias_map, self.prior, self.shrink = bias_map, prior, shrink

    def maps(self, x: torch.Tensor, out_size: tuple[int, int],
             valid_frac: tuple[float, float]) -> torch.Tensor:
        """Read-out maps from assembled features (the first ``in_channels`` channels are spatial)."""
        b, _, h, w = x.shape
        z = _rows(x[:, : self.in_channels].float()) @ self.fit.weight.to(x.device)
        if self.bias_map is None:
            z += self.fit.bias.to(z)
        else:
            if self.bias_map.shape[0] != h * w:
                raise ValueError(
                    f"read-out: features have a {h}x{w} grid, the read-out was fitted on "
                    f"{self.bias_map.shape[0]} positions"
                )
            z.view(b, h * w, -1).add_(self.bias_map.to(z)[None])  # in place: z is the product's own
        if self.prior is not None:
            prior = self.prior.to(z)
            z = compose(z.view(b, h * w, -1), prior, self.out_channels, self.r * self.r)
            if self.shrink is not None:
                z = shrink_toward(z, prior, self.shrink, self.r * self.r)
        return from_grid(z.reshape(b, h, w, -1).permute(0, 3, 1, 2), self.r, out_size, valid_frac)

    def outputs(self, fs: FeatureSet, out_size: tuple[int, int],
                device: str = "cpu") -> tuple[torch.Tensor, None]:
        """(maps on the host, None) of a :class:`~benchmarks.probe.features.store.FeatureSet` batch: the
        streamed test pass's call. The product runs
        on ``device`` (where the backbone ran)."""
        return self.maps(fs.feats.to(device), out_size, fs.valid_frac).cpu(), None


    def describe(self) -> dict:
        d = {"alpha": _json_alpha(self.fit.alpha), "heldout_r2": self.fit.val_r2, "shuffle": self.r}
        if self.bias_map is not None:
            d["prior"] = "per output pixel (heldout_r2: of what that prior leaves)"
        if self.prior is not None:
            d["masked"] = "mask * t and the mask regressed; prediction mask * t + prior * (1 - mask)"
        if self.shrink is not None:
            d["masked"] += ("; shrunk toward the prior by one factor per channel fitted on the held-out "
                            "train images (shrink: 0 = the floor, 1 = as fitted)")
            d["shrink"] = [float(v) for v in self.shrink]
        return d


def readout_columns(task: ProbeTask, rr: int) -> int:
    """Columns the read-out of ``task`` fits per feature position: ``out * rr``, and a masked task's
    mask too (its settings' ``masked_readout`` must say so).

    Raises:
        ValueError: the task's ``masked_readout`` does not match whether it is masked.
    """
    form = task.settings.masked_readout
    if bool(task.masked) != (form in MASKED_FORMS):
        raise ValueError(f"{task.name} read-out: masked_readout is {form!r} but the task is "
                         f"{'' if task.masked else 'not '}masked (expected "
                         f"{'one of ' + str(MASKED_FORMS) if task.masked else 'an empty value'!r})")
    return (task.out_channels + task.masked) * rr


def _json_alpha(a: float) -> float | str:
    return "inf (train prior: the floor)" if math.isinf(a) else a


def holdout_fold(n: int, every: int) -> torch.Tensor:
    """Fold of each of ``n`` train images: 1 (held out for the penalty) when ``i % every == every - 1``.

    With fewer than ``every`` images (but at least 2) the last one is held out, so the penalty is
    always chosen on unseen images rather than defaulting to the smallest grid value.
    """
    i = torch.arange(n)
    fold = (i % every == every - 1).long() if every > 1 else torch.zeros(n, dtype=torch.long)
    if every > 1 and n >= 2 and not bool(fold.any()):
        fold[-1] = 1
    return fold


def solve_readout(stats: RidgeStats, positions: PositionSums, grams: Sequence[torch.Tensor],
                  shift: torch.Tensor, task: ProbeTask, r: int, protocol: ProbeProtocol,
                  alphas: Sequence[float] | None = None) -> LinearShortcut:
    """The read-out from its accumulated sums: the penalty searched on the held-out fold, then refit.

    Args:
        stats: the task's :class:`RidgeStats` (``x^T y`` and target sums per fold; no Gram yet).
        positions: its :class:`PositionSums` (the shared per-position feature sums in ``sx``).
        grams: ``x^T x`` of each fold about ``shift`` (shared by the tasks that read the same features).
        shift: the channel shift of every feature sum.
        task: the :class:`~benchmarks.probe.tasks.ProbeTask` (its output maps; a masked task's targets
            are ``[mask * t, mask]`` and its read-out adds the prior).
        r: shuffle factor.
        protocol: the protocol (``ridge_alphas``).
        alphas: penalty grid instead of the protocol's (``()``: the floor alone).
    """
    for k, xx in enumerate(grams):
        if stats.folds[k].n:
            stats.set_gram(k, xx)
    within, total = within_positions(stats, positions)
    if alphas is None:
        # features that never vary about their per-position mean (the floor's) have nothing to fit
        alphas = protocol.ridge_alphas if bool(total.xx.diagonal().abs().max() > 0) else ()
    fit = fit_ridge(within, alphas, total=total)
    _, mx, my = positions.means()
    bias_map = my - (mx + shift.cpu()[None]) @ fit.weight.double().cpu()
    k = task.out_channels
    prior = masked_prior(positions.sy.sum(0), k, r * r).float() if task.masked else None
    return LinearShortcut(fit, r, k, bias_map.float(), prior)


class OnDemandOutputs:
    """The shortcut's outputs of a training batch, computed from the batch's own assembled features
    (features read from disk: precomputing every row would hold the split in memory, and reading the
    rows again for it would read them twice). Maps are rounded to float16 as :func:`precompute`
    stores them."""

    def __init__(self, shortcut: LinearShortcut, out_size: tuple[int, int], valid_frac: tuple[float, float]):
        self.shortcut, self.out_size, self.valid_frac = shortcut, out_size, valid_frac

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, pooled: torch.Tensor) -> tuple[torch.Tensor, None]:
        maps = self.shortcut.maps(x, self.out_size, self.valid_frac).half().float()
        return maps, None


@torch.no_grad()
def precompute(shortcut: LinearShortcut, task: ProbeTask, features: FeatureSet, protocol: ProbeProtocol,
               batch: int = 8) -> tuple[torch.Tensor, None] | OnDemandOutputs:
    """Shortcut outputs for every row of ``features``: (maps N x O x H x W float16, None).

    Features read row by row from disk (not a tensor) get an :class:`OnDemandOutputs` instead.
    """
    out_size = ReadoutGeometry.of(task, features, protocol).out_size
    if not isinstance(features.feats, torch.Tensor):
        return OnDemandOutputs(shortcut, out_size, features.valid_frac)
    n = features.feats.shape[0]
    maps = []
    for s in range(0, n, batch):
        x, _ = features.batch(torch.arange(s, min(n, s + batch)), protocol.cls_concat)
        maps.append(shortcut.maps(x, out_size, features.valid_frac).half())
    return torch.cat(maps), None
