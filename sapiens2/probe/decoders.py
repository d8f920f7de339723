"""Light task decoders trained on frozen features: a linear head and a pixel-shuffle decoder.

Both take the tapped feature maps (concatenated along channels, optionally with the broadcast CLS
tokens) at stride ``patch_size`` and predict ``out_channels`` maps at stride ``output_stride``
(cropped to the unpadded image). An optional global branch predicts ``global_channels`` scalars
from the spatially pooled features and CLS tokens (the pointmap scale).
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


class ProbeDecoder(nn.Module):
    """Linear or pixel-shuffle decoder.

    Args:
        kind: ``"linear"`` or ``"pixelshuffle"``.
        in_channels: channels of the assembled spatial features.
        out_channels: predicted maps.
        patch_size: stride of the input features.
        output_stride: stride of the output maps.
        hidden: pixel-shuffle decoder width after the 1x1 reduction.
        min_hidden: narrowest width of an upsampling stage (the width halves per stage).
        stage_stride: the pixel-shuffle decoder's conv stages stop at this stride (or at
            ``output_stride`` when coarser); a 1x1 conv + PixelShuffle(r) head covers the rest.
        pooled_channels: size of the pooled vector (for the global branch).
        global_channels: scalars predicted from the pooled vector (0: none).
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
        pooled_channels: int = 0,
        global_channels: int = 0,
    ):
        super().__init__()
        self.kind = kind
        self.output_stride = output_stride
        if kind == "linear":
            self.body = nn.Identity()
            self.head = nn.Conv2d(in_channels, out_channels, 1)
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
        else:
            raise ValueError(f"unknown decoder kind {kind!r}; expected 'linear' or 'pixelshuffle'")
        self.global_head = nn.Linear(pooled_channels, global_channels) if global_channels else None
        # the global branch sees its pooled inputs standardised with train-set statistics, so a
        # small, un-centred signal (e.g. log scale 1.9 +- 0.15) is learnable in a short schedule
        self.register_buffer("pool_mean", torch.zeros(pooled_channels))
        self.register_buffer("pool_std", torch.ones(pooled_channels))

    def set_pooled_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Standardise the pooled vector channel-wise: ``(pooled - mean) / std``."""
        with torch.no_grad():
            self.pool_mean.copy_(mean)
            self.pool_std.copy_(std)

    def forward(
        self,
        x: torch.Tensor,
        pooled: torch.Tensor | None,
        out_size: tuple[int, int],
        valid_frac: tuple[float, float] = (1.0, 1.0),
    ):
        """Predict maps of size ``out_size`` (the unpadded image at ``output_stride``).

        Args:
            x: B x C x h x w assembled features (padded grid).
            pooled: B x C_pool pooled vector (needed with a global branch).
            out_size: (H_out, W_out) of the unpadded image at the output stride.
            valid_frac: fraction of the padded grid's height/width that is image (1 without padding).

        Returns:
            (maps B x out x H_out x W_out, global B x global_channels or None).
        """
        y = self.head(self.body(x))
        padded = (
            math.ceil(out_size[0] / valid_frac[0] - 1e-6),
            math.ceil(out_size[1] / valid_frac[1] - 1e-6),
        )
        if tuple(y.shape[-2:]) != padded:
            y = F.interpolate(y, size=padded, mode="bilinear", align_corners=False)
        y = y[..., : out_size[0], : out_size[1]]
        g = None
        if self.global_head is not None:
            g = self.global_head((pooled - self.pool_mean) / self.pool_std)
        return y, g
