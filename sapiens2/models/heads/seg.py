"""Body-part segmentation head (``SegHead``) of the official Sapiens2 seg models."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sapiens2.models.heads.common import check_channels, conv_stack, deconv_stack, last_feature
from sapiens2.registry import MODELS


@MODELS.register_module()
class SegHead(nn.Module):
    """Deconvolutions (x2 each), k x k convs, then a 1x1 conv to per-class logits.

    The layout is the one of :class:`PoseHeatmapHead`; the official seg configs use four kernel-4
    deconvs, so the logits come out at the input resolution (16x the patch grid).

    Args:
        in_channels: channels of the backbone feature map.
        num_classes: number of classes (29 for the official models).
        deconv_out_channels: output channels of each deconv stage.
        deconv_kernel_sizes: kernel of each deconv stage (2, 3 or 4).
        conv_out_channels: output channels of each conv stage.
        conv_kernel_sizes: kernel of each conv stage.
        loss_decode: training loss config of the official head; stored, unused.
        init_cfg: accepted for config compatibility; unused.
    """

    def __init__(self, in_channels: int, num_classes: int = 29,
                 deconv_out_channels: Sequence[int] = (), deconv_kernel_sizes: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 loss_decode: dict | list | None = None, init_cfg: dict | None = None) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.num_classes = num_classes
        self.loss_decode = loss_decode
        self.deconv_layers = deconv_stack(in_channels, deconv_out_channels, deconv_kernel_sizes)
        mid = deconv_out_channels[-1] if len(deconv_out_channels) else in_channels
        self.conv_layers = conv_stack(mid, conv_out_channels, conv_kernel_sizes)
        mid = conv_out_channels[-1] if len(conv_out_channels) else mid
        self.conv_seg = nn.Conv2d(mid, num_classes, 1)

    def forward(self, inputs: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits B x num_classes x (H * 2^n) x (W * 2^n)."""
        x = last_feature(inputs)
        check_channels(type(self).__name__, x, self.in_channels)
        return self.conv_seg(self.conv_layers(self.deconv_layers(x)))
