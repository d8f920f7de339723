"""The raw-pixel-patch baseline: each patch's normalised pixels are its feature (no weights)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.probe.backbones.base import LayerFeatures, ProbeBackbone
from benchmarks.probe.registry import PROBE_BACKBONES


@PROBE_BACKBONES.register_module()
class PixelPatches(ProbeBackbone):
    """Features = the 3 x p x p pixels of each patch (pixel-unshuffle); one "layer", no CLS token.

    Args:
        patch_size: patch side p; features have 3 * p * p channels.
        img_size: unused.
    """

    weights = "none"

    def __init__(self, patch_size: int = 16, img_size: tuple[int, int] | None = None):
        super().__init__()
        self.patch_size = int(patch_size)
        self.embed_dims = 3 * self.patch_size**2
        self.num_layers = 1
        self.has_cls = False

    def forward_layers(self, x: torch.Tensor, layers: list[int]) -> LayerFeatures:
        f = F.pixel_unshuffle(x, self.patch_size)
        return [f for _ in layers], None
