"""The decoder's optimiser and learning-rate schedule, looked up by the protocol's names.

``ProbeProtocol.optimizer`` names an entry of :data:`OPTIMIZERS` (built with the protocol's ``lr``,
``betas`` and ``weight_decay``) and ``ProbeProtocol.schedule`` an entry of :data:`SCHEDULES` (a
multiplier of ``lr`` per iteration, from ``warmup_iters``, ``iterations`` and ``min_lr_ratio``).

Example:
    >>> from benchmarks.probe.train.optim import lr_factor
    >>> from benchmarks.probe.protocol import ProbeProtocol
    >>> p = ProbeProtocol(warmup_iters=10, iterations=110, min_lr_ratio=0.0)
    >>> [round(lr_factor(it, p), 3) for it in (0, 9, 60, 110)]
    [0.1, 1.0, 0.5, 0.0]
    >>> lr_factor(60, p.replace(schedule="warmup_constant"))
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from sapiens2.errors import UnknownNameError

if TYPE_CHECKING:
    from benchmarks.probe.protocol import ProbeProtocol


def _adamw(params: Iterable[torch.nn.Parameter], protocol: ProbeProtocol) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        params, lr=protocol.lr, betas=tuple(protocol.betas), weight_decay=protocol.weight_decay
    )


def _adam(params: Iterable[torch.nn.Parameter], protocol: ProbeProtocol) -> torch.optim.Optimizer:
    # weight decay as an L2 term of the gradient (torch's Adam), not decoupled as in AdamW
    return torch.optim.Adam(
        params, lr=protocol.lr, betas=tuple(protocol.betas), weight_decay=protocol.weight_decay
    )


def _warmup(it: int, protocol: ProbeProtocol) -> float | None:
    return (it + 1) / protocol.warmup_iters if it < protocol.warmup_iters else None


def _warmup_cosine(it: int, protocol: ProbeProtocol) -> float:
    warm = _warmup(it, protocol)
    if warm is not None:
        return warm
    span = max(1, protocol.iterations - protocol.warmup_iters)
    t = min(1.0, (it - protocol.warmup_iters) / span)
    return protocol.min_lr_ratio + (1 - protocol.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t))


def _warmup_constant(it: int, protocol: ProbeProtocol) -> float:
    warm = _warmup(it, protocol)
    return 1.0 if warm is None else warm


OPTIMIZERS = {"adamw": _adamw, "adam": _adam}
SCHEDULES = {"warmup_cosine": _warmup_cosine, "warmup_constant": _warmup_constant}


def check_training_names(protocol: ProbeProtocol) -> None:
    """Raise :class:`UnknownNameError` unless the protocol's optimiser and schedule are known."""
    if protocol.optimizer not in OPTIMIZERS:
        raise UnknownNameError("protocol optimizer", protocol.optimizer, OPTIMIZERS)
    if protocol.schedule not in SCHEDULES:
        raise UnknownNameError("protocol schedule", protocol.schedule, SCHEDULES)


def build_optimizer(params: Iterable[torch.nn.Parameter], protocol: ProbeProtocol) -> torch.optim.Optimizer:
    """The protocol's optimiser over ``params``."""
    check_training_names(protocol)
    return OPTIMIZERS[protocol.optimizer](params, protocol)


def lr_factor(it: int, protocol: ProbeProtocol) -> float:
    """Learning-rate multiplier of iteration ``it`` under the protocol's schedule."""
    check_training_names(protocol)
    return SCHEDULES[protocol.schedule](it, protocol)
