"""The decoder every read-out builds: a closed-form linear shortcut plus, optionally, a trained part.

Both parts take the tapped feature maps (concatenated along channels, optionally with the broadcast
CLS tokens) at stride ``patch_size`` and predict ``out_channels`` maps at stride ``output_stride``
(cropped to the unpadded image). The shortcut
(:class:`~benchmarks.probe.readout.shortcut.LinearShortcut`) is fitted in closed form and attached as
``decoder.shortcut``; a trained part's output layers start at zero, so training starts from the
linear probe. The read-out modules (:mod:`benchmarks.probe.readout.linear`,
:mod:`benchmarks.probe.readout.pixelshuffle`) say what the trained part is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def padded_size(out_size: tuple[int, int], valid_frac: tuple[float, float]) -> tuple[int, int]:
    """Output size covering the whole padded feature grid, of which ``out_size`` is the image part."""
    return (
        math.ceil(out_size[0] / valid_frac[0] - 1e-6),
        math.ceil(out_size[1] / valid_frac[1] - 1e-6),
    )


def crop_to_output(y: torch.Tensor, out_size: tuple[int, int],
                   valid_frac: tuple[float, float]) -> torch.Tensor:
    """Maps over the padded grid -> the unpadded image at the output stride (bilinear resize first
    when the grid's output size is not the padded size, e.g. patch 14 at stride 4)."""
    padded = padded_size(out_size, valid_frac)
    if tuple(y.shape[-2:]) != padded:
        y = F.interpolate(y, size=padded, mode="bilinear", align_corners=False)
    return y[..., : out_size[0], : out_size[1]]


class ProbeDecoder(nn.Module):
    """A task's decoder: the attached closed-form shortcut plus the read-out's trained part, if any.

    Built by the task's read-out (:meth:`~benchmarks.probe.readout.base.ProbeReadout.build_decoder`).

    Args:
        output_stride: stride of the output maps.
        body: the trained part's feature layers (None: nothing trained, the shortcut alone).
        head: the trained part's prediction layers, run on ``body``'s output.
    """

    def __init__(self, output_stride: int, body: nn.Module | None = None, head: nn.Module | None = None):
        super().__init__()
        self.output_stride = output_stride
        self.shortcut = None  # a fitted LinearShortcut (not a module: never trained or saved)
        self.body, self.head = body, head

    def forward(
        self,
        x: torch.Tensor,
        out_size: tuple[int, int],
        valid_frac: tuple[float, float] = (1.0, 1.0),
        base: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, None]:
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
