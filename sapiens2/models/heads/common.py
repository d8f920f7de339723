"""Building blocks shared by the Sapiens2 task heads.

The official heads are ``nn.Sequential`` stacks whose state-dict indices step in threes
(``conv, norm, act``) or fours for pixel-shuffle blocks (``conv, shuffle, norm, act``); the helpers
here build exactly those stacks so that official checkpoints load by key.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

# (padding, output_padding) of a stride-2 transposed conv that exactly doubles the size.
_DECONV_PADDING = {4: (1, 0), 3: (1, 1), 2: (0, 0)}


class RMSNorm2d(nn.Module):
    """RMS normalisation over the channel dimension of a B x C x H x W map.

    The learnable per-channel weight lives in a child ``norm`` (an ``nn.RMSNorm`` over the last
    dimension), which gives the official key ``<prefix>.norm.weight``.

    Args:
        num_channels: number of channels C.
        eps: added to the mean square before the square root.
    """

    def __init__(self, num_channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(num_channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def make_norm(kind: str, channels: int) -> nn.Module:
    """Norm layer of a head: ``'instance'`` (no affine, the official default) or ``'rms'``."""
    if kind == "instance":
        return nn.InstanceNorm2d(channels)
    if kind == "rms":
        return RMSNorm2d(channels)
    raise ValueError(f"unknown head norm {kind!r}; expected 'instance' or 'rms'")


def check_lengths(head: str, **lists: Sequence) -> None:
    """Raise a ValueError naming ``head`` when the given lists differ in length."""
    lengths = {name: len(value) for name, value in lists.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{head}: these lists must have the same length, got {lengths}")


def deconv_stack(in_channels: int, out_channels: Sequence[int], kernel_sizes: Sequence[int],
                 norm: str = "instance") -> nn.Sequential:
    """Stride-2 ConvTranspose2d (no bias) + norm + SiLU per stage; each stage doubles H and W.

    Args:
        in_channels: channels of the input map.
        out_channels: output channels of each stage.
        kernel_sizes: kernel of each stage, one of 2, 3, 4.
        norm: norm kind, see :func:`make_norm`.

    Returns:
        An ``nn.Sequential`` with the transposed convs at indices 0, 3, 6, ...
    """
    check_lengths("deconv stack", out_channels=out_channels, kernel_sizes=kernel_sizes)
    layers: list[nn.Module] = []
    for out_ch, k in zip(out_channels, kernel_sizes):
        if k not in _DECONV_PADDING:
            raise ValueError(f"deconv kernel size must be one of {sorted(_DECONV_PADDING)}, got {k}")
        pad, out_pad = _DECONV_PADDING[k]
        layers += [
            nn.ConvTranspose2d(in_channels, out_ch, k, stride=2, padding=pad, output_padding=out_pad,
                               bias=False),
            make_norm(norm, out_ch),
            nn.SiLU(),
        ]
        in_channels = out_ch
    return nn.Sequential(*layers)


def conv_stack(in_channels: int, out_channels: Sequence[int], kernel_sizes: Sequence[int],
               stride: int = 1, norm: str = "instance") -> nn.Sequential:
    """Conv2d ('same' padding for odd kernels) + norm + SiLU per stage.

    Args:
        in_channels: channels of the input map.
        out_channels: output channels of each stage.
        kernel_sizes: kernel of each stage.
        stride: stride of every conv (the pointmap scale branch uses 2).
        norm: norm kind, see :func:`make_norm`.

    Returns:
        An ``nn.Sequential`` with the convs at indices 0, 3, 6, ...
    """
    check_lengths("conv stack", out_channels=out_channels, kernel_sizes=kernel_sizes)
    layers: list[nn.Module] = []
    for out_ch, k in zip(out_channels, kernel_sizes):
        layers += [
            nn.Conv2d(in_channels, out_ch, k, stride=stride, padding=(k - 1) // 2),
            make_norm(norm, out_ch),
            nn.SiLU(),
        ]
        in_channels = out_ch
    return nn.Sequential(*layers)


def pixel_shuffle_block(in_channels: int, out_channels: int, kernel_size: int = 3, factor: int = 2,
                        norm: str = "instance") -> nn.Sequential:
    """Conv2d to ``out_channels * factor**2``, PixelShuffle, norm, SiLU (keys ``0`` and ``2``)."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels * factor**2, kernel_size, padding=(kernel_size - 1) // 2),
        nn.PixelShuffle(factor),
        make_norm(norm, out_channels),
        nn.SiLU(),
    )


def last_feature(inputs: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
    """The feature map a head decodes: the tensor itself, or the last entry of a backbone tuple."""
    if isinstance(inputs, torch.Tensor):
        x = inputs
    elif isinstance(inputs, (tuple, list)) and inputs:
        x = inputs[-1]
    else:
        raise TypeError(f"head input must be a tensor or a non-empty tuple of tensors, got {type(inputs)}")
    if not isinstance(x, torch.Tensor) or x.ndim != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x)
        raise ValueError(f"head input must be a B x C x H x W feature map, got {shape}")
    return x


def check_channels(head: str, x: torch.Tensor, in_channels: int) -> None:
    """Raise a ValueError naming ``head`` when the feature map has the wrong channel count."""
    if x.shape[1] != in_channels:
        raise ValueError(f"{head}: expected a feature map with {in_channels} channels, got shape "
                         f"{tuple(x.shape)}")


class DeconvConvHead(nn.Module):
    """Deconvolutions (x2 each), k x k convs, then a 1x1 predictor conv (pose and seg heads).

    Every deconv and conv is followed by InstanceNorm (no affine) and SiLU. Subclasses set
    ``predictor_name`` (the official attribute name of the final 1x1 conv, so checkpoints load by key).

    Args:
        in_channels: channels of the backbone feature map.
        num_outputs: channels of the prediction.
        deconv_out_channels: output channels of each deconv stage.
        deconv_kernel_sizes: kernel of each deconv stage (2, 3 or 4).
        conv_out_channels: output channels of each conv stage.
        conv_kernel_sizes: kernel of each conv stage.
        loss_decode: training loss config of the official head; stored, unused.
    """

    predictor_name = "conv_out"

    def __init__(self, in_channels: int, num_outputs: int, deconv_out_channels: Sequence[int] = (),
                 deconv_kernel_sizes: Sequence[int] = (), conv_out_channels: Sequence[int] = (),
                 conv_kernel_sizes: Sequence[int] = (), loss_decode: dict | list | None = None) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.loss_decode = loss_decode
        self.deconv_layers = deconv_stack(in_channels, deconv_out_channels, deconv_kernel_sizes)
        mid = deconv_out_channels[-1] if len(deconv_out_channels) else in_channels
        self.conv_layers = conv_stack(mid, conv_out_channels, conv_kernel_sizes)
        mid = conv_out_channels[-1] if len(conv_out_channels) else mid
        setattr(self, self.predictor_name, nn.Conv2d(mid, num_outputs, 1))

    def forward(self, inputs: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        """Prediction B x num_outputs x (H * 2^n) x (W * 2^n) from a feature map (or a backbone
        output tuple)."""
        x = last_feature(inputs)
        check_channels(type(self).__name__, x, self.in_channels)
        return getattr(self, self.predictor_name)(self.conv_layers(self.deconv_layers(x)))
