"""Top-down pose heatmap head (``PoseHeatmapHead``) of the official Sapiens2 pose models."""

from __future__ import annotations

from collections.abc import Sequence

from sapiens2.models.heads.common import DeconvConvHead
from sapiens2.registry import MODELS


@MODELS.register_module()
class PoseHeatmapHead(DeconvConvHead):
    """Deconvolutions (x2 each), k x k convs, then a 1x1 conv (``conv_pose``) to one heatmap per
    keypoint.

    Every deconv and conv is followed by InstanceNorm (no affine) and SiLU. With the official two
    kernel-4 deconvs the heatmaps are at 1/4 of the input resolution (stride 4, as UDP expects).

    Args:
        in_channels: channels of the backbone feature map.
        out_channels: number of keypoints (308 for the official models).
        deconv_out_channels, deconv_kernel_sizes, conv_out_channels, conv_kernel_sizes,
            loss_decode: see :class:`DeconvConvHead`.
        init_cfg: accepted for config compatibility; unused.
    """

    predictor_name = "conv_pose"

    def __init__(self, in_channels: int, out_channels: int = 308,
                 deconv_out_channels: Sequence[int] = (), deconv_kernel_sizes: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 loss_decode: dict | list | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(in_channels, out_channels, deconv_out_channels, deconv_kernel_sizes,
                         conv_out_channels, conv_kernel_sizes, loss_decode=loss_decode)
        self.out_channels = out_channels
