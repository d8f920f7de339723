"""Light task decoders on frozen features: a linear shortcut and a pixel-shuffle body on its residual.

Both parts take the tapped feature maps (concatenated along channels, optionally with the broadcast
CLS tokens) at stride ``patch_size`` and predict ``out_channels`` maps at stride ``output_stride``
(cropped to the unpadded image). The shortcut
(:class:`~benchmarks.probe.readout.shortcut.LinearShortcut`) is fitted in closed form and attached as
``decoder.shortcut``; the trained body's output layers start at zero, so training starts from the
linear probe. ``kind="linear"`` is the shortcut alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


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


def padded_size(out_size: tuple[int, int], valid_frac: tuple[float, float]) -> tuple[int, int]:
    """Output size covering the whole padded feature grid, of which ``out_size`` is the image part."""
    return (
        math.ceil(out_size[0] / valid_frac[0] - 1e-6),
        math.ceil(out_size[1] / valid_frac[1] - 1e-6),
    )


def crop_to_output(y: torch.Tensor, out_size, valid_frac) -> torch.Tensor:
    """Maps over the padded grid -> the unpadded image at the output stride (bilinear resize first
    when the grid's output size is not the padded size, e.g. patch 14 at stride 4)."""
    padded = padded_size(out_size, valid_frac)
    if tuple(y.shape[-2:]) != padded:
        y = F.interpolate(y, size=padded, mode="bilinear", align_corners=False)
    return y[..., : out_size[0], : out_size[1]]


class ProbeDecoder(nn.Module):
    """Linear or pixel-shuffle decoder.

    Args:
        kind: ``"linear"`` (no trained part: the attached shortcut alone) or ``"pixelshuffle"``.
        in_channels: channels of the assembled spatial features.
        out_channels: predicted maps.
        patch_size: stride of the input features.
        output_stride: stride of the output maps.
        hidden: pixel-shuffle decoder width after the 1x1 reduction.
        min_hidden: narrowest width of an upsampling stage (the width halves per stage).
        stage_stride: the pixel-shuffle decoder's conv stages stop at this stride (or at
            ``output_stride`` when coarser); a 1x1 conv + PixelShuffle(r) head covers the rest.
        zero_init_output: start the prediction conv at zero (residual on a shortcut).
    """

    def __init__(
        self,
        kind: str,
        in_channels: int,
        out_channels: int,
        patch_size: int,
        output_stride: int,
        hidden: int = 64,
        min_hidden: int = 32,
        stage_stride: int = 4,
        zero_init_output: bool = False,
    ):
        super().__init__()
        self.kind = kind
        self.output_stride = output_stride
        self.shortcut = None  # a fitted LinearShortcut (not a module: never trained or saved)
        self.body = self.head = None
        if kind == "linear":
            pass
        elif kind == "pixelshuffle":
            # 1x1 reduction, then per x2 stage: conv3x3 -> PixelShuffle(2), halving the width (min 32)
            layers: list[nn.Module] = [nn.Conv2d(in_channels, hidden, 1), nn.GELU()]
            width = hidden
            end, shuffle = head_shuffle_factor(patch_size, output_stride, stage_stride)
            for _ in range(num_upsample_stages(patch_size, end)):
                nxt = max(min_hidden, width // 2)
                layers += [nn.Conv2d(width, nxt * 4, 3, padding=1), nn.PixelShuffle(2), nn.GELU()]
                width = nxt
            if len(layers) == 2:  # no upsampling needed: one 3x3 conv keeps the decoder non-linear and local
                layers += [nn.Conv2d(width, width, 3, padding=1), nn.GELU()]
            self.body = nn.Sequential(*layers)
            conv = nn.Conv2d(width, out_channels * shuffle**2, 1)
            self.head = nn.Sequential(conv, nn.PixelShuffle(shuffle)) if shuffle > 1 else conv
            if zero_init_output:
                nn.init.zeros_(conv.weight)
                nn.init.zeros_(conv.bias)
        else:
            raise ValueError(f"unknown decoder kind {kind!r}; expected 'linear' or 'pixelshuffle'")

    def forward(
        self,
        x: torch.Tensor,
        out_size: tuple[int, int],
        valid_frac: tuple[float, float] = (1.0, 1.0),
        base: torch.Tensor | None = None,
    ):
        """Predict maps of size ``out_size`` (the unpadded image at ``output_stride``).

        Args:
            x: B x C x h x w assembled features (padded grid).
            out_size: (H_out, W_out) of the unpadded image at the output stride.
            valid_frac: fraction of the padded grid's height/width that is image (1 without padding).
            base: precomputed shortcut outputs for these rows (computed here when None).

        Returns:
            (maps B x out x H_out x W_out, None): the tasks' loss and evaluator take a global-output
            slot, which no read-out fills.
        """
        if self.shortcut is not None and base is None:
            base = self.shortcut.maps(x, out_size, valid_frac)
        y = None
        if self.body is not None:
            y = crop_to_output(self.head(self.body(x)), out_size, valid_frac)
        if base is not None:
            y = base.to(x.dtype) if y is None else y + base.to(y.dtype)
        if y is None:
            raise RuntimeError("a 'linear' decoder needs its fitted shortcut (decoder.shortcut)")
        return y, None
