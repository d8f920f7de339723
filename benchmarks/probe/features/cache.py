"""The probe's on-disk feature cache and the finiteness check every stored feature passes.

One ``.safetensors`` file per image, ``<cache_dir>/<feature key>/<image hash>.safetensors``, holding
``feats`` (L*C x h x w) and, for backbones with a CLS token, ``cls`` (L*C). Files are written to a
temporary name and renamed into place, so a crash never leaves a half-written entry under the final
name; an entry that is still unreadable (truncated by a full disk or a copy, another dtype, another
shape) is reported by name, deleted and computed again rather than used.

A feature that is not finite (NaN, Inf, or a finite value beyond the storage dtype's range, e.g.
8.5e4 in float16 whose largest value is 65504) is a :class:`NonFiniteFeatureError` naming the
backbone, the tapped layer and the image, raised as the features are computed, so before any fit.

Example:
    >>> import torch
    >>> try:
    ...     check_finite([torch.ones(1, 2, 1, 1) * 7e4], None, torch.float16, "PixelPatches", [0], ["img0"])
    ... except NonFiniteFeatureError as e:
    ...     print(e)
    backbone PixelPatches, layer 0, image img0: \
2 feature value(s) exceed the float16 range (max |x| = 7e+04 > 65504); set the protocol's \
feature_dtype to 'float32' or 'bfloat16'
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from sapiens2.errors import BenchError
from sapiens2.utils_io import atomic_write


class NonFiniteFeatureError(BenchError, ValueError):
    """A backbone feature is NaN or Inf, or overflows the protocol's feature dtype."""


def check_finite(feats: Sequence[torch.Tensor], cls: Sequence[torch.Tensor] | None, dtype: torch.dtype,
                 backbone: str, layers: Sequence[int], names: Sequence[str]) -> None:
    """Raise :class:`NonFiniteFeatureError` unless every value is finite and fits ``dtype``.

    Args:
        feats: one B x C x h x w tensor per tapped layer (as the backbone returned them).
        cls: one B x C tensor per tapped layer, or None.
        dtype: the storage dtype the features are cast to.
        backbone: the backbone's name for the message.
        layers: the tapped block indices (same order as ``feats``).
        names: one name per image of the batch (its id, or its position and content hash).
    """
    limit = torch.finfo(dtype).max
    for kind, group in (("feature", feats), ("CLS", cls or [])):
        for layer, t in zip(layers, group):
            t = t.detach()
            # one reduction per image (NaN propagates through the max); the counts only on failure
            top = t.abs().flatten(1).amax(1)
            if bool((torch.isfinite(top) & (top <= limit)).all()):
                continue
            bad = ~torch.isfinite(t)
            over = torch.isfinite(t) & (t.abs() > limit)
            per_image = (bad | over).flatten(1).any(1)
            if not bool(per_image.any()):
                continue
            i = int(torch.nonzero(per_image)[0])
            where = f"backbone {backbone}, layer {layer}, image {names[i]}"
            if kind == "CLS":
                where += " (CLS token)"
            n_bad, n_over = int(bad[i].sum()), int(over[i].sum())
            if n_bad:
                kinds = "NaN" if bool(torch.isnan(t[i]).any()) else "Inf"
                raise NonFiniteFeatureError(
                    f"{where}: {n_bad} non-finite feature value(s) ({kinds}) from the backbone"
                )
            top = float(t[i].abs().max())
            raise NonFiniteFeatureError(
                f"{where}: {n_over} feature value(s) exceed the {str(dtype).replace('torch.', '')} range "
                f"(max |x| = {top:.3g} > {limit:.0f}); set the protocol's feature_dtype to 'float32' "
                "or 'bfloat16'"
            )


class DiskCache:
    """Per-image safetensors files of one feature key.

    Args:
        folder: ``<cache_dir>/<feature key>``.
        dtype: the dtype every entry must have.
    """

    suffix = ".safetensors"

    def __init__(self, folder: str | os.PathLike, dtype: torch.dtype):
        self.folder, self.dtype = Path(folder), dtype
        self.shape: tuple | None = None  # (feats shape, cls length or None) of the first valid entry
        self.rebuilt: list[Path] = []  # entries found unreadable and deleted by this object

    def path(self, h: str) -> Path:
        return self.folder / f"{h}{self.suffix}"

    def read(self, h: str) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """The entry of image hash ``h``; None when absent or invalid (an invalid one is deleted)."""
        path = self.path(h)
        if not path.is_file():
            return None
        try:
            d = load_file(path)
        except (SafetensorError, OSError, RuntimeError, ValueError) as e:
            return self._invalid(path, f"unreadable ({type(e).__name__}: {e})")
        feats, cls = d.get("feats"), d.get("cls")
        if feats is None or feats.dim() != 3 or set(d) - {"feats", "cls"}:
            return self._invalid(path, f"holds {sorted(d)} instead of feats (L*C x h x w) [+ cls]")
        if feats.dtype != self.dtype or (cls is not None and cls.dtype != self.dtype):
            return self._invalid(path, f"has dtype {feats.dtype}, expected {self.dtype}")
        shape = (tuple(feats.shape), None if cls is None else int(cls.shape[0]))
        if cls is not None and (cls.dim() != 1 or int(cls.shape[0]) != feats.shape[0]):
            why = f"has a CLS vector of shape {tuple(cls.shape)} for {feats.shape[0]} channels"
            return self._invalid(path, why)
        if self.shape is not None and shape != self.shape:
            return self._invalid(path, f"has shapes {shape}, the other entries {self.shape}")
        self.shape = shape
        return feats, cls

    def _invalid(self, path: Path, why: str) -> None:
        print(f"feature cache: {path} {why}; deleting it and computing it again", file=sys.stderr)
        try:
            path.unlink()
        except FileNotFoundError:  # another process removed it first
            pass
        self.rebuilt.append(path)
        return None

    def write(self, h: str, feats: torch.Tensor, cls: torch.Tensor | None) -> None:
        """Write the entry of image hash ``h`` (atomically: temporary file, then rename)."""
        obj = {"feats": feats.contiguous()}
        if cls is not None:
            obj["cls"] = cls.contiguous()
        atomic_write(self.path(h), lambda tmp: save_file(obj, tmp))
