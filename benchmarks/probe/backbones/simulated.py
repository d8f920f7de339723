"""A cheap stand-in with a real backbone's feature shapes, for simulating paper-scale probes on a CPU.

``benchmarks.probe.backbones.simulated:SimulatedBackbone`` emits features shaped like
``sapiens2_1b``'s by default (1536 channels per layer, 40 layers, patch 16: a 64 x 48 token grid at
1024 x 768, a CLS token per layer) from seeded random projections of the image patches, so the
probe's data, statistics and memory can be exercised at that scale without the 1.5B-parameter
forward (about 1.4 GFLOP per 1024 x 768 image for four tapped layers instead of ~4.7 TFLOP).

Layer ``l``'s features: the patch pixels (``3 p^2`` values) projected to ``rank`` dimensions by a
fixed matrix, passed through ``tanh`` at a layer-dependent gain (so the layers differ and are not
all linear in the pixels), then expanded to ``embed_dims`` by layer ``l``'s own fixed matrix. The
CLS token is the layer's mean over tokens. Every matrix comes from ``torch.Generator`` seeded by
``(seed, layer)``: the same arguments give bit-identical features in any process.

Example:
    >>> import torch
    >>> bb = SimulatedBackbone(embed_dims=8, num_layers=4, rank=4)
    >>> feats, cls = bb.extract(torch.rand(1, 3, 32, 48), [1, 3])
    >>> [tuple(f.shape) for f in feats], [tuple(c.shape) for c in cls]
    ([(1, 8, 2, 3), (1, 8, 2, 3)], [(1, 8), (1, 8)])
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from benchmarks.probe.backbones.base import LayerFeatures, ProbeBackbone


class SimulatedBackbone(ProbeBackbone):
    """Seeded random-projection features with a chosen backbone's shapes (default: sapiens2_1b's).

    Args:
        embed_dims: channels per tapped layer (sapiens2_1b: 1536; 5b: 2432).
        num_layers: blocks (sapiens2_1b: 40; 5b: 56).
        patch_size: patch side p.
        rank: width of the shared pixel projection.
        seed: seed of every projection.
        img_size: unused (any input size multiple of the patch works).
    """

    weights = "none"
    has_cls = True

    def __init__(
        self,
        embed_dims: int = 1536,
        num_layers: int = 40,
        patch_size: int = 16,
        rank: int = 64,
        seed: int = 0,
        img_size: tuple[int, int] | None = None,
    ):
        super().__init__()
        self.embed_dims, self.num_layers, self.patch_size = int(embed_dims), int(num_layers), int(patch_size)
        self.rank, self.seed = int(rank), int(seed)
        self._mats: dict[int, torch.Tensor] = {}  # generated on first use; not weights (nothing to load)

    def _matrix(self, key: int, rows: int, cols: int) -> torch.Tensor:
        if key not in self._mats:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + key)
            self._mats[key] = torch.randn(rows, cols, generator=g) / math.sqrt(rows)
        return self._mats[key]

    def forward_layers(self, x: torch.Tensor, layers: list[int]) -> LayerFeatures:
        b, _, h, w = x.shape
        p = self.patch_size
        tokens = F.pixel_unshuffle(x.float(), p).flatten(2).transpose(1, 2)  # B x N x 3p^2
        z = tokens @ self._matrix(-1, 3 * p * p, self.rank).to(x.device)
        feats, cls = [], []
        for layer in layers:
            gain = 0.5 + 1.5 * (layer + 1) / self.num_layers
            u = torch.tanh(gain * z)
            f = u @ self._matrix(layer, self.rank, self.embed_dims).to(x.device)  # B x N x C
            cls.append(f.mean(1))
            feats.append(f.transpose(1, 2).reshape(b, self.embed_dims, h // p, w // p))
        return feats, cls

    def describe(self) -> dict:
        return {**super().describe(), "rank": self.rank, "seed": self.seed}
