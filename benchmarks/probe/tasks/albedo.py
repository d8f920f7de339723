"""Albedo probe: 3 channels clamped to [0, 1]; L1 + gradient-L1 loss on GT-mask pixels.

A :class:`~benchmarks.probe.tasks.dense.MaskedDenseTask` (``masked``,
:meth:`ProbeTask.linear_targets`): its floor is the per-pixel train mean albedo over the masks that
cover the pixel. Images may differ in size: the read-out sees every image at the protocol's input size
(the GT resized mask-aware, for training only), and each test image is scored at its native size
(:func:`~benchmarks.probe.tasks.base.dense_targets`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import (
    gradient_l1,
    loss_grid,
    per_sample_masked_mean,
    register_probe_task,
    subsample,
)
from benchmarks.probe.tasks.dense import MaskedDenseTask
from benchmarks.probe.train.losses import register_loss


@dataclass(frozen=True)
class AlbedoSettings(TaskSettings):
    """Albedo settings: full resolution, L1 + gradient L1."""

    output_stride: int = 1
    masked_readout: str = "mask-and-prior-shrunk"
    loss: str = "l1_grad"
    loss_weights: dict = field(default_factory=lambda: {"l1": 1.0, "grad": 1.0})


@register_probe_task
class AlbedoTask(MaskedDenseTask):
    """Diffuse albedo in [0, 1], scored by ``AlbedoEvaluator`` on the GT mask at each image's native size."""

    name = "albedo"
    settings_class = AlbedoSettings
    out_channels = 3
    gt_key = "albedo"
    value_range = (0.0, 1.0)


@register_loss("l1_grad", task="albedo", default_weights={"l1": 1.0, "grad": 0.0})
def l1_grad(task: AlbedoTask, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict) -> dict:
    """L1 and gradient L1 of the albedo maps on GT-mask pixels (the evaluator clamps them to [0, 1])."""
    st = task.protocol.loss_stride
    pred = loss_grid(maps.float(), tgt["albedo"].shape[-2:], st, task.loss_offset)
    gt, mask = (
        subsample(tgt["albedo"], st, task.loss_offset),
        subsample(tgt["mask"], st, task.loss_offset),
    )
    l1 = per_sample_masked_mean((pred - gt).abs(), mask).mean()
    grad = gradient_l1(pred, gt, mask).mean()
    return {"l1": l1, "grad": grad}
