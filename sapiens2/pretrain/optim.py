"""AdamW with the Sapiens2 weight-decay groups, and the warm-up + cosine learning-rate schedule.

Example:
    >>> lr_at(0, 1e-3, warmup_steps=10, total_steps=100, min_lr=0.0)
    0.0001
    >>> lr_at(100, 1e-3, warmup_steps=10, total_steps=100, min_lr=1e-6)
    1e-06
"""

from __future__ import annotations

import math

import torch
from torch import nn

# Parameters named like these are position or special tokens: no weight decay.
NO_DECAY_NAMES = ("cls_token", "storage_tokens", "mask_token", "local_pos_embed", "w_cls", "pos_embed")


def no_weight_decay(name: str, param: torch.Tensor) -> bool:
    """True for norms, biases and other 1-D parameters (LayerScale too), and position/special tokens."""
    leaf = name.rsplit(".", 1)[-1]
    return param.ndim <= 1 or leaf == "bias" or leaf in NO_DECAY_NAMES


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups over the trainable parameters: decayed and not decayed.

    Returns:
        ``[{"params", "names", "weight_decay": weight_decay}, {"params", "names", "weight_decay": 0.0}]``.
    """
    decay, no_decay = {"params": [], "names": []}, {"params": [], "names": []}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        group = no_decay if no_weight_decay(name, p) else decay
        group["params"].append(p)
        group["names"].append(name)
    return [{**decay, "weight_decay": float(weight_decay)}, {**no_decay, "weight_decay": 0.0}]


def build_optimizer(model: nn.Module, lr: float, betas=(0.9, 0.95), weight_decay: float = 0.05,
                    eps: float = 1e-8) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups` (``foreach`` off: the update order is fixed and reproducible)."""
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=tuple(betas), eps=eps,
                             foreach=False)


def lr_at(step: int, base_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """Learning rate of ``step`` (0-based): linear warm-up to ``base_lr`` over ``warmup_steps``
    (step 0 gets ``base_lr / warmup_steps``), then cosine decay to ``min_lr`` at ``total_steps``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set every group's learning rate."""
    for group in optimizer.param_groups:
        group["lr"] = lr
