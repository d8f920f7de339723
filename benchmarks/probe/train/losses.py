"""Named probe losses: ``TaskSettings.loss`` picks one, ``TaskSettings.loss_weights`` weighs its terms.

A loss is a function ``fn(task, maps, glob, tgt) -> {term: scalar tensor}`` registered for one task
with :func:`register_loss`; the total is the weighted sum of its terms in their declared order.
Each task module registers its own losses, so a protocol's loss name is looked up, never assumed.

Example:
    >>> from benchmarks.probe.train.losses import get_loss
    >>> import benchmarks.probe.tasks  # registers the five tasks' losses
    >>> spec = get_loss("seg", "cross_entropy_dice")
    >>> spec.weights({"dice": 0.5})
    {'ce': 1.0, 'dice': 0.5}
    >>> get_loss("seg", "focal")
    Traceback (most recent call last):
    ...
    sapiens2.errors.UnknownNameError: unknown seg loss 'focal'; known: cross_entropy_dice
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sapiens2.errors import UnknownNameError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LossSpec:
    """A registered loss.

    Attributes:
        name: the name protocols use.
        task: the task it applies to.
        fn: ``fn(task, maps, glob, tgt) -> {term: scalar tensor}``, terms in ``default_weights`` order.
        default_weights: every term with the weight it has when ``loss_weights`` leaves it out.
    """

    name: str
    task: str
    fn: Callable
    default_weights: dict

    def weights(self, given: dict) -> dict:
        """Every term's weight: ``given`` over the defaults; an unknown term raises ``UnknownNameError``."""
        for k in given:
            if k not in self.default_weights:
                raise UnknownNameError(f"term of the {self.task} loss {self.name!r}", k, self.default_weights)
        return {k: float(given.get(k, w)) for k, w in self.default_weights.items()}

    def __call__(self, task: object, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                 weights: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """(weighted total, {term: float}) of one batch."""
        terms = self.fn(task, maps, glob, tgt)
        total = None
        for k, w in weights.items():
            total = w * terms[k] if total is None else total + w * terms[k]
        return total, {k: float(v.detach()) for k, v in terms.items()}


LOSSES: dict[tuple[str, str], LossSpec] = {}


def register_loss(name: str, task: str, default_weights: dict) -> Callable:
    """Decorator: register ``fn`` as loss ``name`` of ``task`` with its terms' default weights."""

    def wrap(fn: Callable) -> Callable:
        LOSSES[(task, name)] = LossSpec(name, task, fn, dict(default_weights))
        return fn

    return wrap


def get_loss(task: str, name: str) -> LossSpec:
    """The loss ``name`` of ``task``; an unknown name lists the task's losses."""
    if (task, name) not in LOSSES:
        raise UnknownNameError(f"{task} loss", name, sorted(n for t, n in LOSSES if t == task))
    return LOSSES[(task, name)]
