"""Body-part segmentation head (``SegHead``) of the official Sapiens2 seg models."""

from __future__ import annotations

from collections.abc import Sequence

from sapiens2.models.heads.common import DeconvConvHead
from sapiens2.registry import MODELS


@MODELS.register_module()
class SegHead(DeconvConvHead):
    """Deconvolutions (x2 each), k x k convs, then a 1x1 conv (``conv_seg``) to per-class logits.

    The layout is the one of :class:`PoseHeatmapHead`; the official seg configs use four kernel-4
    deconvs, so the logits come out at the input resolution (16x the patch grid).

    Args:
        in_channels: channels of the backbone feature map.
        num_classes: number of classes (29 for the official models).
        deconv_out_channels, deconv_kernel_sizes, conv_out_channels, conv_kernel_sizes,
            loss_decode: see :class:`DeconvConvHead`.
        init_cfg: accepted for config compatibility; unused.
    """

    predictor_name = "conv_seg"

    def __init__(self, in_channels: int, num_classes: int = 29,
                 deconv_out_channels: Sequence[int] = (), deconv_kernel_sizes: Sequence[int] = (),
                 conv_out_channels: Sequence[int] = (), conv_kernel_sizes: Sequence[int] = (),
                 loss_decode: dict | list | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(in_channels, num_classes, deconv_out_channels, deconv_kernel_sizes,
                         conv_out_channels, conv_kernel_sizes, loss_decode=loss_decode)
        self.num_classes = num_classes
