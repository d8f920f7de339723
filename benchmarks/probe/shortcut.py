"""The decoders' linear shortcut: closed-form ridge regression from the tapped features to the outputs.

Every feature position predicts its ``R x R`` block of output pixels (``R = ceil(patch / output
stride)``), i.e. a 1x1 conv to ``out * R^2`` channels followed by PixelShuffle(R), fitted in closed
form on the train split (:mod:`benchmarks.probe.ridge`; the penalty is chosen on held-out train
images). Targets are the task's pre-activation targets (:meth:`ProbeTask.linear_targets`): seg
one-hot logits with a margin, albedo logits, canonical pointmap, unit normals, pose heatmaps. The
global branch (pointmap ``log s``) gets the same treatment from the pooled vector (leave-one-out
penalty). The pixel-shuffle body is then trained on what the shortcut leaves, so a linear probe is
the starting point of every decoder, and features that hold the targets linearly (the ground-truth
oracle) are decoded exactly.
"""

from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F

from benchmarks.probe.batching import select
from benchmarks.probe.decoders import crop_to_output, padded_size
from benchmarks.probe.ridge import RidgeFit, RidgeStats, fit_ridge, fit_ridge_dual

_GRAM_CACHE: dict = {}


def shortcut_factor(patch_size: int, output_stride: int) -> int:
    """Output pixels per feature position along each axis: ``ceil(patch / output_stride)`` (>= 1)."""
    return max(1, math.ceil(patch_size / output_stride - 1e-9))


def to_grid(y: torch.Tensor, grid: tuple[int, int], r: int, out_size, valid_frac) -> torch.Tensor:
    """Output-space maps B x O x H x W -> feature-grid rows layout B x O*r*r x h x w (inverse of
    :func:`from_grid` up to resampling when ``r`` does not divide the padded size)."""
    ph, pw = padded_size(out_size, valid_frac)
    y = F.pad(y.float(), (0, max(0, pw - y.shape[-1]), 0, max(0, ph - y.shape[-2])))[..., :ph, :pw]
    full = (grid[0] * r, grid[1] * r)
    if (ph, pw) != full:
        y = F.interpolate(y, size=full, mode="bilinear", align_corners=False)
    return F.pixel_unshuffle(y, r)


def from_grid(z: torch.Tensor, r: int, out_size, valid_frac) -> torch.Tensor:
    """Feature-grid layout B x O*r*r x h x w -> output maps B x O x H_out x W_out (cropped)."""
    return crop_to_output(F.pixel_shuffle(z, r) if r > 1 else z, out_size, valid_frac)


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


class LinearShortcut:
    """A fitted shortcut (kept outside the trained module: it is refit, never trained or saved).

    Args:
        fit: spatial ridge fit, C x (out * r^2).
        r: shuffle factor.
        out_channels: output maps.
        global_fit: ridge fit of the global outputs from the pooled vector, or None.
    """

    def __init__(self, fit: RidgeFit, r: int, out_channels: int, global_fit: RidgeFit | None = None):
        self.fit, self.r, self.out_channels, self.global_fit = fit, r, out_channels, global_fit
        self.in_channels = fit.weight.shape[0]

    def maps(self, x: torch.Tensor, out_size, valid_frac) -> torch.Tensor:
        """Shortcut maps from assembled features (the first ``in_channels`` channels are spatial)."""
        b, _, h, w = x.shape
        z = self.fit(_rows(x[:, : self.in_channels].float()))
        z = z.reshape(b, h, w, -1).permute(0, 3, 1, 2)
        return from_grid(z, self.r, out_size, valid_frac)

    def global_outputs(self, pooled: torch.Tensor) -> torch.Tensor | None:
        return None if self.global_fit is None else self.global_fit(pooled.float())

    def describe(self) -> dict:
        d = {"alpha": _json_alpha(self.fit.alpha), "heldout_r2": self.fit.val_r2, "shuffle": self.r}
        if self.global_fit is not None:
            d.update(global_alpha=_json_alpha(self.global_fit.alpha), global_loo_r2=self.global_fit.val_r2)
        return d


def _json_alpha(a: float) -> float | str:
    return "inf (train mean)" if math.isinf(a) else a


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


def _feature_grams(
    features, folds: torch.Tensor, batch: int, product_dtype: torch.dtype = torch.float64
) -> tuple[str, torch.Tensor, list]:
    """(content key, channel mean, ``x^T x`` of each fold about that mean) of the spatial features.

    Each batch's product is computed in ``product_dtype`` and accumulated in float64. Cached by
    content: the dense tasks share their images, hence their features.
    """
    f = features.feats
    h = hashlib.sha256(f"{tuple(f.shape)}|{f.dtype}|{folds.tolist()}|{product_dtype}".encode())
    h.update(f.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    key = h.hexdigest()
    if key not in _GRAM_CACHE:
        shift = f.double().mean(dim=(0, 2, 3))
        grams = [torch.zeros(f.shape[1], f.shape[1], dtype=torch.float64, device=f.device) for _ in range(2)]
        for idx in _batches(folds, batch):
            x = (_rows(f[idx].double()) - shift).to(product_dtype)
            grams[int(folds[idx[0]])] += (x.T @ x).double()
        _GRAM_CACHE.clear()
        _GRAM_CACHE[key] = (shift, grams)
    return (key, *_GRAM_CACHE[key])


def _batches(folds: torch.Tensor, batch: int) -> list[torch.Tensor]:
    """Row-index batches that never mix folds."""
    out = []
    for k in (0, 1):
        idx = torch.nonzero(folds == k).flatten()
        out += [idx[s : s + batch] for s in range(0, len(idx), batch)]
    return out


@torch.no_grad()
def fit_shortcut(task, features, targets: dict, protocol, batch: int = 8) -> LinearShortcut:
    """Fit ``task``'s shortcut on the train ``features`` / ``targets`` under ``protocol``.

    Args:
        task: the :class:`~benchmarks.probe.tasks.ProbeTask`.
        features: train :class:`~benchmarks.probe.features.FeatureSet`.
        targets: the task's train targets.
        protocol: the protocol (``ridge_alphas``, ``ridge_holdout_every``, output stride).
        batch: images per accumulation step.

    Returns:
        The fitted :class:`LinearShortcut`.
    """
    stride = min(protocol.task(task.name).output_stride, features.patch_size)
    r = shortcut_factor(features.patch_size, stride)
    out_size = task.output_size(features.image_size, stride)
    n, c, gh, gw = features.feats.shape
    folds = holdout_fold(n, protocol.ridge_holdout_every)
    product_dtype = getattr(torch, protocol.ridge_product_dtype)
    key, shift, grams = _feature_grams(features, folds, batch, product_dtype)
    stats = RidgeStats(c, task.out_channels * r * r, x_key=key, shift=shift, product_dtype=product_dtype)
    for idx in _batches(folds, batch):
        x = _rows(features.feats[idx].float())
        y = to_grid(task.linear_targets(select(targets, idx)), (gh, gw), r, out_size, features.valid_frac)
        stats.update(x, _rows(y), fold=int(folds[idx[0]]), gram=False)
    for k, xx in enumerate(grams):
        if stats.folds[k].n:
            stats.set_gram(k, xx)
    fit = fit_ridge(stats, protocol.ridge_alphas)
    global_fit = None
    if task.global_channels:
        pooled = torch.cat(
            [
                features.batch(torch.arange(s, min(n, s + batch)), protocol.cls_concat)[1]
                for s in range(0, n, batch)
            ]
        )
        global_fit = fit_ridge_dual(pooled, task.global_targets(targets).float(), protocol.ridge_alphas)
    return LinearShortcut(fit, r, task.out_channels, global_fit)


@torch.no_grad()
def precompute(shortcut: LinearShortcut, task, features, protocol, batch: int = 8):
    """Shortcut outputs for every row of ``features``: (maps N x O x H x W float16, global N x G or None)."""
    stride = min(protocol.task(task.name).output_stride, features.patch_size)
    out_size = task.output_size(features.image_size, stride)
    n = features.feats.shape[0]
    maps, glob = [], []
    for s in range(0, n, batch):
        idx = torch.arange(s, min(n, s + batch))
        x, pooled = features.batch(idx, protocol.cls_concat)
        maps.append(shortcut.maps(x, out_size, features.valid_frac).half())
        g = shortcut.global_outputs(pooled)
        if g is not None:
            glob.append(g)
    return torch.cat(maps), (torch.cat(glob) if glob else None)
