"""Pointmap head with its scale branch (``PointmapHead``) of the official Sapiens2 pointmap models."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sapiens2.models.heads.common import check_channels, check_lengths, conv_stack, last_feature
from sapiens2.models.heads.dense import PixelShuffleHead
from sapiens2.registry import MODELS


def scale_mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Flatten, then Linear + SiLU between consecutive ``sizes`` (no activation after the last)."""
    if len(sizes) < 2:
        raise ValueError(f"scale_final_layer needs at least an input and an output size, got {list(sizes)}")
    layers: list[nn.Module] = [nn.Flatten()]
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.SiLU())
    return nn.Sequential(*layers)


def scale_branch_grid(height: int, width: int, kernel_sizes: Sequence[int]) -> tuple[int, int]:
    """Spatial size after the stride-2 scale convs, for a patch grid of ``height`` x ``width``."""
    for k in kernel_sizes:
        pad = (k - 1) // 2
        height = (height + 2 * pad - k) // 2 + 1
        width = (width + 2 * pad - k) // 2 + 1
    return height, width


@MODELS.register_module()
class PointmapHead(PixelShuffleHead):
    """Canonical pointmap decoder plus a scalar scale branch.

    The pointmap path is the :class:`NormalHead` layout (predictor ``conv_pointmap``). The scale
    branch runs stride-2 convs (+ InstanceNorm + SiLU) on the backbone feature map, flattens, and an
    MLP (``scale_final_layer``: Flatten, then Linear/SiLU pairs) gives one scale per image. The first
    entry of ``scale_final_layer`` is the flattened size, so it fixes the input size of the model:
    ``scale_conv_out_channels[-1] * h' * w'`` where h' x w' is the patch grid after the strided convs
    (see :func:`scale_branch_grid`).

    To run such a model at another input size, set :attr:`scale_feature_hw` to the feature grid it was
    trained on (``sapiens2.inference.load_model`` does when ``input_size_hw`` differs from the config):
    the scale branch then sees the feature map resized (bilinear) to that grid, while the pointmap path
    runs at the new size. This is an approximation outside the official code (the scale was trained on
    the native grid only); with ``None`` (the default) the head is exactly the official one.

    Args:
        in_channels: channels of the backbone feature map.
        upsample_channels: output channels of each x2 pixel-shuffle block.
        conv_out_channels: output channels of each conv stage after the upsampling.
        conv_kernel_sizes: kernel of each conv stage.
        scale_conv_out_channels: output channels of each stride-2 scale conv.
        scale_conv_kernel_sizes: kernel of each scale conv.
        scale_final_layer: MLP sizes, flattened input first, 1 last.
        out_channels: channels of the pointmap (3).
        loss_decode: training loss config of the official head; stored, unused.
        init_cfg: accepted for config compatibility; unused.
    """

    norm = "instance"
    predictor_name = "conv_pointmap"

    def __init__(self, in_channels: int, upsample_channels: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 scale_conv_out_channels: Sequence[int] = (), scale_conv_kernel_sizes: Sequence[int] = (),
                 scale_final_layer: Sequence[int] = (), out_channels: int = 3,
                 loss_decode: dict | list | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(in_channels, upsample_channels, conv_out_channels, conv_kernel_sizes,
                         out_channels=out_channels, loss_decode=loss_decode)
        check_lengths("PointmapHead", scale_conv_out_channels=scale_conv_out_channels,
                      scale_conv_kernel_sizes=scale_conv_kernel_sizes)
        self.scale_kernel_sizes = list(scale_conv_kernel_sizes)
        self.scale_conv_layers = conv_stack(in_channels, scale_conv_out_channels, scale_conv_kernel_sizes,
                                            stride=2)
        self.scale_final_layer = scale_mlp(scale_final_layer)
        self.scale_feature_hw: tuple[int, int] | None = None

    def check_scale_grid(self, feature_hw: Sequence[int]) -> None:
        """Raise unless a feature map of ``feature_hw`` gives the scale MLP its input size.

        Raises:
            ValueError: names the flattened size, ``scale_final_layer[0]`` and the feature grid.
        """
        h, w = scale_branch_grid(int(feature_hw[0]), int(feature_hw[1]), self.scale_kernel_sizes)
        channels = self.scale_conv_layers[-3].out_channels if self.scale_kernel_sizes else self.in_channels
        got, expected = channels * h * w, self.scale_final_layer[1].in_features
        if got != expected:
            raise ValueError(
                f"PointmapHead: the scale branch flattens ({channels}, {h}, {w}) = {got} values but "
                f"scale_final_layer[0] is {expected}; the model only accepts inputs whose patch grid "
                f"gives that size (feature map {tuple(int(v) for v in feature_hw)})")

    def forward(self, inputs: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(canonical pointmap B x 3 x (H * 2^n) x (W * 2^n), scale B x 1)."""
        x = last_feature(inputs)
        check_channels(type(self).__name__, x, self.in_channels)
        pointmap = self.decode(x)
        if self.scale_feature_hw is not None and tuple(x.shape[2:]) != tuple(self.scale_feature_hw):
            x = F.interpolate(x, size=tuple(self.scale_feature_hw), mode="bilinear", align_corners=False)
        self.check_scale_grid(x.shape[2:])
        return pointmap, self.scale_final_layer(self.scale_conv_layers(x))
