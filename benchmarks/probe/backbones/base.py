"""The uniform contract every probing backbone plug-in follows.

A plug-in is a small ``nn.Module`` subclass of :class:`ProbeBackbone`, registered in
``sapiens2.registry.PROBE_BACKBONES``. It declares ``patch_size``, ``embed_dims`` (channels of one
tapped layer), ``num_layers``, ``has_cls`` and the pixel normalisation it expects, and implements
:meth:`ProbeBackbone.forward_layers`. Everything else (normalisation, padding, shape checks) is done
here, identically for all backbones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# what ``forward_layers`` returns: one feature map per tapped layer, and their CLS tokens (or None)
LayerFeatures = tuple[list[torch.Tensor], list[torch.Tensor] | None]


class FeatureShapeError(ValueError):
    """A backbone returned features that do not match what it declared."""


class PluginError(FeatureShapeError):
    """A backbone's own code failed or declared impossible settings; the message names its module."""


def _who(backbone: nn.Module) -> str:
    """``backbone Name (module m)``, saying "plug-in" for a class defined outside sapiens2-bench."""
    cls = type(backbone)
    own = cls.__module__.startswith(("benchmarks.", "sapiens2.", "evaluators.", "leaderboard."))
    return f"{'backbone' if own else 'plug-in backbone'} {cls.__name__} (module {cls.__module__})"


class ProbeBackbone(nn.Module):
    """Base class of probing backbones.

    Subclasses set ``patch_size``, ``embed_dims``, ``num_layers``, ``has_cls`` (and optionally
    ``mean``/``std`` for [0, 1] input) in ``__init__`` and implement :meth:`forward_layers`.
    ``describe()`` goes into the result record.
    """

    patch_size: int = 16
    embed_dims: int = 0
    num_layers: int = 1
    has_cls: bool = False
    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD
    weights: str = "random"

    def forward_layers(self, x: torch.Tensor, layers: list[int]) -> LayerFeatures:
        """Run the backbone on normalised, padded input.

        Args:
            x: B x 3 x H x W, H and W multiples of ``patch_size``, normalised with ``mean``/``std``.
            layers: 0-based block indices to return (the last block includes the final norm).

        Returns:
            (featmaps: one B x embed_dims x H/p x W/p per index, cls: one B x embed_dims per index, or
            None when the backbone has no CLS token).
        """
        raise NotImplementedError

    def padded_size(self, h: int, w: int, padding: str = "pad") -> tuple[int, int]:
        """Input size the backbone sees for an (h, w) image under the padding policy."""
        p = self.patch_size
        if padding == "pad":
            return math.ceil(h / p) * p, math.ceil(w / p) * p
        return max(p, round(h / p) * p), max(p, round(w / p) * p)

    def prepare(self, images: torch.Tensor, padding: str = "pad") -> torch.Tensor:
        """Normalise [0, 1] images and apply the padding policy."""
        mean = torch.tensor(self.mean, dtype=images.dtype, device=images.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=images.dtype, device=images.device).view(1, 3, 1, 1)
        x = (images - mean) / std
        h, w = x.shape[-2:]
        ph, pw = self.padded_size(h, w, padding)
        if (ph, pw) == (h, w):
            return x
        if padding == "pad":
            return F.pad(x, (0, pw - w, 0, ph - h))
        return F.interpolate(x, size=(ph, pw), mode="bilinear", align_corners=False)

    @torch.inference_mode()
    def extract(self, images: torch.Tensor, layers: list[int], padding: str = "pad") -> LayerFeatures:
        """Normalise, pad, run and check: the features of [0, 1] images.

        Returns:
            (featmaps list, cls list or None), validated against the declared shapes.
        """
        self.check_declared()
        x = self.prepare(images, padding)
        try:
            feats, cls = self.forward_layers(x, layers)
        except (torch.cuda.OutOfMemoryError, KeyboardInterrupt):
            raise
        except Exception as e:  # the backbone's own code: name it, keep the cause (--debug shows it)
            raise PluginError(f"{_who(self)}: forward_layers raised {type(e).__name__}: {e} (on input "
                              f"{tuple(x.shape)}, layers {layers}); this is an error in that backbone's "
                              "code, not in the probe (--debug shows the traceback)") from e
        self.check_features(feats, cls, x.shape, layers)
        return feats, cls

    def check_declared(self) -> None:
        """Raise :class:`PluginError` unless patch_size, embed_dims and num_layers are positive integers."""
        bad = [f"{k}={getattr(self, k, None)!r}" for k in ("patch_size", "embed_dims", "num_layers")
               if not (isinstance(getattr(self, k, None), int) and not isinstance(getattr(self, k), bool)
                       and getattr(self, k) > 0)]
        if bad:
            raise PluginError(f"{_who(self)} declares {', '.join(bad)}: each must be a positive integer "
                              "(set them in its __init__; see docs/probing.md, 'Adding a backbone')")

    def check_features(self, feats: Sequence[torch.Tensor], cls: Sequence[torch.Tensor] | None,
                       input_shape: Sequence[int], layers: list[int]) -> None:
        """Raise :class:`FeatureShapeError` unless the features match the declared shapes."""
        name = type(self).__name__
        b, _, h, w = input_shape
        gh, gw = h // self.patch_size, w // self.patch_size
        if not isinstance(feats, (list, tuple)) or len(feats) != len(layers):
            raise FeatureShapeError(
                f"backbone {name}: expected {len(layers)} feature maps for layers "
                f"{layers}, got {type(feats).__name__} of length {len(feats)}"
            )
        for i, f in zip(layers, feats):
            if not isinstance(f, torch.Tensor):
                raise PluginError(f"{_who(self)}: feature map of layer {i} is a {type(f).__module__}."
                                  f"{type(f).__name__}, not a torch.Tensor (forward_layers returns tensors)")
            want = (b, self.embed_dims, gh, gw)
            if tuple(f.shape) != want:
                raise FeatureShapeError(
                    f"backbone {name}: feature map of layer {i} has shape {tuple(f.shape)},"
                    f" declared B x C x H/p x W/p = {want} (embed_dims={self.embed_dims},"
                    f" patch_size={self.patch_size}, input {h}x{w})"
                )
        if self.has_cls:
            if cls is None or len(cls) != len(layers):
                raise FeatureShapeError(
                    f"backbone {name}: declared a CLS token but returned "
                    f"{'none' if cls is None else len(cls)} for {len(layers)} layers"
                )
            for i, c in zip(layers, cls):
                if not isinstance(c, torch.Tensor):
                    raise PluginError(f"{_who(self)}: CLS token of layer {i} is a {type(c).__name__}, not a "
                                      "torch.Tensor")
                if tuple(c.shape) != (b, self.embed_dims):
                    raise FeatureShapeError(
                        f"backbone {name}: CLS token of layer {i} has shape "
                        f"{tuple(c.shape)}, declared {(b, self.embed_dims)}"
                    )

    def describe(self) -> dict:
        """Name, parameter count and weights source for the result record."""
        return {
            "type": type(self).__name__,
            "params": int(sum(p.numel() for p in self.parameters())),
            "weights": self.weights,
            "patch_size": self.patch_size,
            "embed_dims": self.embed_dims,
            "num_layers": self.num_layers,
            "has_cls": self.has_cls,
        }


def tokens_to_featmap(tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """B x N x C patch tokens (row-major) -> B x C x h x w."""
    b, n, c = tokens.shape
    h, w = grid
    if n != h * w:
        raise FeatureShapeError(f"{n} patch tokens do not fill a {h}x{w} grid")
    return tokens.transpose(1, 2).reshape(b, c, h, w)
