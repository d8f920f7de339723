"""Plug-in backbones for the non-finite feature tests: raw pixel patches scaled past float16's range,
or with one NaN in one tapped layer of one image (``_probe_loud:LoudPixels`` / ``_probe_loud:NanPixels``)."""

from __future__ import annotations

import torch

from benchmarks.probe.backbones.pixels import PixelPatches


class LoudPixels(PixelPatches):
    """Pixel patches x 4e4: normalised pixels reach about 8.5e4, above float16's 65504."""

    def __init__(self, patch_size: int = 8, img_size=None, gain: float = 4e4):
        super().__init__(patch_size, img_size)
        self.num_layers = 2
        self.gain = gain

    def forward_layers(self, x, layers):
        feats, _ = super().forward_layers(x, layers)
        return [f * self.gain for f in feats], None


class NanPixels(PixelPatches):
    """Pixel patches with one NaN in tapped layer 1 of the batch's image 1 (layer 0 stays finite)."""

    def __init__(self, patch_size: int = 8, img_size=None):
        super().__init__(patch_size, img_size)
        self.num_layers = 2

    def forward_layers(self, x, layers):
        feats, _ = super().forward_layers(x, layers)
        out = []
        for layer, f in zip(layers, feats):
            f = f.clone()
            if layer == 1 and f.shape[0] > 1:
                f[1, 0, 0, 0] = torch.nan
            out.append(f)
        return out, None
