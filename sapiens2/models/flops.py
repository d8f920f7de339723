"""Parameter and FLOP counts of Sapiens2 backbones, counted on the meta device (no memory, seconds).

Counting: ``torch.utils.flop_counter.FlopCounterMode`` around one forward of a meta-device model on a
meta input of batch 1. It counts 2 FLOPs per multiply-accumulate (MAC) of every matmul and convolution
(``aten.addmm``/``mm`` for linear layers, ``aten.convolution`` for the patch embedding, ``aten.bmm`` or the
SDPA kernels for the attention matmuls Q.K^T and A.V; on the meta device SDPA runs its math path and
shows up as ``bmm``). Element-wise work (norms, RoPE, softmax, SiLU) is not counted.

Model-card convention (documented in :data:`CARD_CONVENTION`): the Sapiens2 README's TFLOPs are closest
to **MACs of the linear and convolution layers, attention matmuls excluded** (one "FLOP" per MAC, the
fvcore/mmengine counter convention, which skips ``scaled_dot_product_attention``). No convention we tried
reproduces all five printed values exactly (see :func:`card_rows` and the model-card command).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sapiens2.models.builder import build_model

CARD_CONVENTION = (
    "flops = MACs (1 per multiply-accumulate) of linear and conv layers at batch 1, attention matmuls "
    "(QK^T, AV) excluded, element-wise ops excluded; counted with torch FlopCounterMode on the meta device "
    "(which reports 2 per MAC) and halved"
)
_ATTENTION_OPS = ("bmm", "scaled_dot_product", "_efficient_attention", "_flash_attention", "baddbmm")
_LINEAR_OPS = ("addmm", "mm", "matmul", "linear")


@dataclass
class FlopCount:
    """FLOPs of one forward (2 per MAC), split by kind."""

    linear: int = 0
    conv: int = 0
    attention: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        """All counted FLOPs (2 per MAC)."""
        return self.linear + self.conv + self.attention + self.other

    @property
    def card_flops(self) -> int:
        """The model-card convention: MACs of linear + conv layers, attention excluded."""
        return (self.linear + self.conv) // 2


def count_flops(model: torch.nn.Module, input_shape: tuple[int, ...]) -> FlopCount:
    """Count the FLOPs of ``model(x)`` for a meta tensor ``x`` of ``input_shape``.

    Args:
        model: a module on the meta device (build it under ``torch.device('meta')``).
        input_shape: e.g. ``(1, 3, 1024, 768)``.

    Returns:
        A :class:`FlopCount` (2 FLOPs per MAC).
    """
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.empty(*input_shape, device="meta")
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    result = FlopCount()
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        name = getattr(op, "__name__", str(op)).split(".")[0]  # OpOverloadPacket 'aten.addmm' -> 'addmm'
        if any(tag in name for tag in _ATTENTION_OPS):
            result.attention += int(flops)
        elif name == "convolution":
            result.conv += int(flops)
        elif name in _LINEAR_OPS:
            result.linear += int(flops)
        else:
            result.other += int(flops)
    return result


def backbone_complexity(arch: str, img_size: tuple[int, int] | None = None) -> dict:
    """Exact parameter count and FLOPs of an official backbone arch at its model-card resolution.

    Args:
        arch: an official arch name (``sapiens2_0.1b`` ... ``sapiens2_1b_4k``, ``sapiens2_5b``).
        img_size: (H, W); default the arch's constructor size (1024x768, 4K: 4096x3072).

    Returns:
        dict with ``params``, ``img_size``, ``flops`` (card convention), ``flops_total_2x_macs``,
        ``macs_linear``, ``macs_conv``, ``macs_attention``.
    """
    model = build_model(arch, device="meta").eval()
    if img_size is None:
        img_size = tuple(getattr(model, "img_size", (1024, 768)))
    params = sum(p.numel() for p in model.parameters())
    count = count_flops(model, (1, 3, *img_size))
    return {
        "params": params,
        "img_size": list(img_size),
        "flops": count.card_flops,
        "flops_total_2x_macs": count.total,
        "macs_linear": count.linear // 2,
        "macs_conv": count.conv // 2,
        "macs_attention": count.attention // 2,
    }
