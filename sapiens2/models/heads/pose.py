"""Top-down pose heatmap head (``PoseHeatmapHead``) of the official Sapiens2 pose models."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sapiens2.models.heads.common import check_channels, conv_stack, deconv_stack, last_feature
from sapiens2.registry import MODELS


@MODELS.register_module()
class PoseHeatmapHead(nn.Module):
    """Deconvolutions (x2 each), k x k convs, then a 1x1 conv to one heatmap per keypoint.

    Every deconv and conv is followed by InstanceNorm (no affine) and SiLU. With the official two
    kernel-4 deconvs the heatmaps are at 1/4 of the input resolution (stride 4, as UDP expects).

    Args:
        in_channels: channels of the backbone feature map.
        out_channels: number of keypoints (308 for the official models).
        deconv_out_channels: output channels of each deconv stage.
        deconv_kernel_sizes: kernel of each deconv stage (2, 3 or 4).
        conv_out_channels: output channels of each conv stage.
        conv_kernel_sizes: kernel of each conv stage.
        loss_decode: training loss config of the official head; stored, unused.
        init_cfg: accepted for config compatibility; unused.
    """

    def __init__(self, in_channels: int, out_channels: int = 308,
                 deconv_out_channels: Sequence[int] = (), deconv_kernel_sizes: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 loss_decode: dict | list | None = None, init_cfg: dict | None = None) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.loss_decode = loss_decode
        self.deconv_layers = deconv_stack(in_channels, deconv_out_channels, deconv_kernel_sizes)
        mid = deconv_out_channels[-1] if len(deconv_out_channels) else in_channels
        self.conv_layers = conv_stack(mid, conv_out_channels, conv_kernel_sizes)
        mid = conv_out_channels[-1] if len(conv_out_channels) else mid
        self.conv_pose = nn.Conv2d(mid, out_channels, 1)

    def forward(self, inputs: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """Heatmaps B x K x (H * 2^n) x (W * 2^n) from a feature map (or a backbone output tuple)."""
        x = last_feature(inputs)
        check_channels(type(self).__name__, x, self.in_channels)
        return self.conv_pose(self.conv_layers(self.deconv_layers(x)))
