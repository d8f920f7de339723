"""The trained pixel-shuffle body on the closed-form shortcut's residual (``decoder="pixelshuffle"``).

A 1x1 reduction to ``decoder_channels``, then per x2 stage a conv3x3 and PixelShuffle(2) (halving the
width, never below ``decoder_min_channels``) down to ``decoder_stage_stride``; a prediction conv emits
``out * r**2`` channels that one PixelShuffle(r) takes to the task's output stride. Its output layer
starts at zero, so training starts from the linear read-out. Its protocol id covers the closed-form
fit's knobs and the body's (optimiser, schedule, widths, loss).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from torch import nn

from benchmarks.probe.readout.base import DecoderShape, ProbeReadout, register_readout

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView


def num_upsample_stages(patch_size: int, output_stride: int) -> int:
    """x2 pixel-shuffle stages needed to go from stride ``patch_size`` to ``output_stride``."""
    return max(0, round(math.log2(max(patch_size, 1) / output_stride)))


def head_shuffle_factor(patch_size: int, output_stride: int, stage_stride: int) -> tuple[int, int]:
    """(conv-stage end stride, final PixelShuffle factor) of the pixel-shuffle decoder.

    The conv3x3 + PixelShuffle(2) stages run from ``patch_size`` down to
    ``max(output_stride, min(stage_stride, patch_size))``; the prediction conv then emits
    ``out * r**2`` channels that one PixelShuffle(r) takes to ``output_stride``.
    """
    end = max(output_stride, min(stage_stride, max(patch_size, 1)))
    return end, max(1, round(end / output_stride))


@register_readout
class PixelShuffleReadout(ProbeReadout):
    """``decoder="pixelshuffle"``: the shortcut plus a trained pixel-shuffle body, one per seed."""

    name = "pixelshuffle"
    description = "frozen backbone + linear probe + trained pixel-shuffle body"
    protocol_groups = ("readout", "body")
    trains = True
    needs_shortcut = False

    @classmethod
    def build_layers(cls, shape: DecoderShape, protocol: ProtocolView) -> tuple[nn.Module, nn.Module]:
        """(body, head): the layers are made in this order so a seed gives the same weights."""
        widths = protocol.body
        layers: list[nn.Module] = [nn.Conv2d(shape.in_channels, widths.decoder_channels, 1), nn.GELU()]
        width = widths.decoder_channels
        end, shuffle = head_shuffle_factor(shape.patch_size, shape.output_stride,
                                           protocol.readout.decoder_stage_stride)
        for _ in range(num_upsample_stages(shape.patch_size, end)):
            nxt = max(widths.decoder_min_channels, width // 2)
            layers += [nn.Conv2d(width, nxt * 4, 3, padding=1), nn.PixelShuffle(2), nn.GELU()]
            width = nxt
        if len(layers) == 2:  # no upsampling needed: one 3x3 conv keeps the decoder non-linear and local
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.GELU()]
        conv = nn.Conv2d(width, shape.out_channels * shuffle**2, 1)
        head = nn.Sequential(conv, nn.PixelShuffle(shuffle)) if shuffle > 1 else conv
        return nn.Sequential(*layers), head
