"""A random-init 2-layer conv net as a probing backbone: what a linear read-out gets from untrained features.

Two convolutions, each followed by GELU: ``conv(3 -> width, k1, stride s1) -> GELU -> conv(width ->
width, k2, stride s2) -> GELU``, padding ``(k - s) / 2`` so the grid is exactly ``H / (s1 s2)`` x
``W / (s1 s2)``. Weights are He-normal (std ``sqrt(2 / fan_in)``), biases 0, seeded by the probe's
``init_seed``; nothing is trained. The three factors a linear read-out of random features depends on
are separate knobs: ``width`` (feature channels), ``strides`` (their product is the patch, so the token
grid) and ``kernels`` (receptive field ``k1 + (k2 - 1) s1`` pixels). One layer is tapped (the last).

It is a ``package.module:ClassName`` plug-in (not registered, so importing it changes no registry),
used in docs/design/random_features.md (why a random wide network can beat a small pretrained one):

Example:
    sapiens2-bench probe --backbone '{"type": "benchmarks.analysis.random_convnet:RandomConvNet",
        "name": "convnet_w768_p16_rf16", "width": 768}' --out OUT
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.probe.backbones.base import ProbeBackbone


class RandomConvNet(ProbeBackbone):
    """Random 2-layer conv net; features B x ``width`` x H/p x W/p with ``p = strides[0] * strides[1]``.

    Args:
        width: channels of both convolutions (= ``embed_dims``, the read-out's feature count).
        strides: (s1, s2), the strides of the two convolutions.
        kernels: (k1, k2), their kernel sizes; ``k >= s`` and ``k - s`` even.
        img_size: unused (the net is fully convolutional).

    Raises:
        ValueError: a non-positive width, or a kernel/stride pair that does not tile the grid exactly.
    """

    def __init__(self, width: int = 768, strides=(4, 4), kernels=(4, 4), img_size=None):
        super().__init__()
        strides, kernels = tuple(int(s) for s in strides), tuple(int(k) for k in kernels)
        if int(width) < 1 or len(strides) != 2 or len(kernels) != 2:
            raise ValueError(f"RandomConvNet: width must be >= 1 and strides/kernels pairs, got "
                             f"width={width}, strides={strides}, kernels={kernels}")
        for s, k in zip(strides, kernels):
            if s < 1 or k < s or (k - s) % 2:
                raise ValueError(f"RandomConvNet: kernel {k} with stride {s} does not tile the grid exactly "
                                 "(need stride >= 1, kernel >= stride and kernel - stride even)")
        self.width, self.strides, self.kernels = int(width), strides, kernels
        self.patch_size, self.embed_dims = strides[0] * strides[1], self.width
        self.num_layers, self.has_cls = 1, False
        self.conv1 = nn.Conv2d(3, self.width, kernels[0], strides[0], (kernels[0] - strides[0]) // 2)
        self.conv2 = nn.Conv2d(self.width, self.width, kernels[1], strides[1], (kernels[1] - strides[1]) // 2)
        for conv in (self.conv1, self.conv2):
            fan_in = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
            nn.init.normal_(conv.weight, std=math.sqrt(2.0 / fan_in))
            nn.init.zeros_(conv.bias)

    @property
    def receptive_field(self) -> int:
        """Side in input pixels of the square one output feature sees."""
        return self.kernels[0] + (self.kernels[1] - 1) * self.strides[0]

    def forward_layers(self, x: torch.Tensor, layers: list[int]):
        f = F.gelu(self.conv2(F.gelu(self.conv1(x))))
        return [f for _ in layers], None

    def describe(self) -> dict:
        """The base description plus the three factors (for the record)."""
        return {**super().describe(), "strides": list(self.strides), "kernels": list(self.kernels),
                "receptive_field": self.receptive_field}
