"""The base of every probe task's settings (each task module subclasses it with its own knobs).

A task's settings class is the ``settings_class`` of its registered probe task
(:mod:`benchmarks.probe.tasks`); its field defaults are the task's defaults, and
:class:`~benchmarks.probe.protocol.ProbeProtocol` holds one instance per task in ``tasks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol


@dataclass(frozen=True)
class TaskSettings:
    """Per-task decoder, output resolution and loss (the base of every task's settings).

    Args:
        decoder: ``"linear"`` (the closed-form ridge shortcut alone: a 1x1 map from the tapped
            features to ``out * R^2`` channels + PixelShuffle(R), nothing trained) or
            ``"pixelshuffle"`` (that shortcut plus a trained body on its residual: 1x1 reduction,
            conv3x3 + PixelShuffle(2) stages to the stage stride, a zero-initialised prediction conv).
        output_stride: stride of the decoder output w.r.t. the input (pose heatmaps are at this stride;
            dense predictions are bilinearly resized from it to the full target size).
        loss: name of a loss registered for the task (:mod:`benchmarks.probe.train.losses`).
        loss_weights: weights of the loss terms, by term name (a term left out keeps the loss's
            default weight; an unknown term is an error).
        masked_readout: how the read-out of a masked task (scored on the GT mask only) treats the mask:
            ``"mask-and-prior"`` regresses ``mask * t`` and the mask and predicts
            ``mask * t + prior * (1 - mask)`` (:mod:`benchmarks.probe.readout.shortcut`);
            ``"mask-and-prior-shrunk"`` (a masked task's default) shrinks that prediction toward the
            prior by one factor in [0, 1] per channel fitted on the held-out train images
            (:mod:`benchmarks.probe.readout.shrink`); empty for a task that is not masked, and then
            left out of the protocol id.
    """

    decoder: str = "linear"
    output_stride: int = 4
    loss: str = ""
    loss_weights: dict = field(default_factory=dict)
    masked_readout: str = ""

    # fields only a trained body reads: the closed-form linear read-out's protocol id leaves them out
    BODY_ONLY_FIELDS: ClassVar[tuple[str, ...]] = ("loss", "loss_weights")
    # the task's vocabulary field (keypoint or label set; "": none): empty means the task's default
    # set, and an empty value is left out of the protocol id (the ids of the default sets never change)
    VOCABULARY_FIELD: ClassVar[str] = ""


class ProtocolView(Protocol):
    """A probing protocol as the tasks and read-outs read it: each task's settings, and every group
    field by its flat name (``protocol.loss_stride``). :class:`~benchmarks.probe.protocol.ProbeProtocol`
    is one; the tasks and read-outs name this view because that module imports them."""

    def task(self, name: str) -> TaskSettings:
        ...

    def __getattr__(self, name: str) -> Any:
        ...
