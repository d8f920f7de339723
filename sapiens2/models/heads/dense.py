"""Pixel-shuffle dense heads of the official Sapiens2 models: ``NormalHead`` and ``AlbedoHead``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sapiens2.models.heads.common import (
    check_channels,
    conv_stack,
    last_feature,
    make_norm,
    pixel_shuffle_block,
)
from sapiens2.registry import MODELS


class PixelShuffleHead(nn.Module):
    """3x3 input conv, pixel-shuffle upsampling blocks (x2 each), k x k convs, 1x1 predictor.

    Each conv is followed by the head's norm (class attribute ``norm``) and SiLU. Subclasses set
    ``predictor_name`` (the official attribute name of the final 1x1 conv).

    Args:
        in_channels: channels of the backbone feature map.
        upsample_channels: output channels of each x2 pixel-shuffle block.
        conv_out_channels: output channels of each conv stage after the upsampling.
        conv_kernel_sizes: kernel of each conv stage.
        out_channels: channels of the prediction (3).
        loss_decode: training loss config of the official head; stored, unused.
        init_cfg: accepted for config compatibility; unused.
    """

    norm = "instance"
    predictor_name = "conv_out"

    def __init__(self, in_channels: int, upsample_channels: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 out_channels: int = 3, loss_decode: dict | list | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.loss_decode = loss_decode
        self.input_conv = nn.Sequential(
            nn.Conv2d(in_channels, in_channels, 3, padding=1), make_norm(self.norm, in_channels), nn.SiLU()
        )
        blocks, mid = [], in_channels
        for ch in upsample_channels:
            blocks.append(pixel_shuffle_block(mid, ch, norm=self.norm))
            mid = ch
        self.upsample_blocks = nn.ModuleList(blocks)
        self.conv_layers = conv_stack(mid, conv_out_channels, conv_kernel_sizes, norm=self.norm)
        mid = conv_out_channels[-1] if len(conv_out_channels) else mid
        setattr(self, self.predictor_name, nn.Conv2d(mid, out_channels, 1))

    def decode(self, x: torch.Tensor) -> torch.Tensor:
        """The dense prediction from a checked feature map."""
        x = self.input_conv(x)
        for block in self.upsample_blocks:
            x = block(x)
        return getattr(self, self.predictor_name)(self.conv_layers(x))

    def forward(self, inputs: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """Prediction B x out_channels x (H * 2^n) x (W * 2^n)."""
        x = last_feature(inputs)
        check_channels(type(self).__name__, x, self.in_channels)
        return self.decode(x)


@MODELS.register_module()
class NormalHead(PixelShuffleHead):
    """Surface-normal head: unnormalised 3-channel normals (InstanceNorm, predictor ``conv_normal``)."""

    norm = "instance"
    predictor_name = "conv_normal"


@MODELS.register_module()
class AlbedoHead(PixelShuffleHead):
    """Albedo head: like :class:`NormalHead` but with RMSNorm2d (weights) and ``conv_albedo``."""

    norm = "rms"
    predictor_name = "conv_albedo"
