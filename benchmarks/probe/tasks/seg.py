"""Body-part segmentation probe: 29-class logits, cross-entropy + Dice, scored by ``SegEvaluator``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from benchmarks.probe.losses import register_loss
from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import ProbeTask, loss_grid, register_probe_task, subsample
from evaluators.seg import SegEvaluator

IGNORE = 255


@dataclass(frozen=True)
class SegSettings(TaskSettings):
    """Segmentation settings: logits at full resolution, cross-entropy + Dice.

    Args:
        logit_margin: the shortcut regresses the one-hot labels times this margin.
    """

    output_stride: int = 1
    loss: str = "cross_entropy_dice"
    loss_weights: dict = field(default_factory=lambda: {"ce": 1.0, "dice": 0.5})
    logit_margin: float = 10.0


@register_probe_task
class SegTask(ProbeTask):
    """Per-pixel class logits at the output stride, resized bilinearly to the GT size."""

    name = "seg"
    settings_class = SegSettings
    out_channels = 29
    required_keys = ("label",)

    def targets(self, samples):
        return {"label": torch.stack([torch.as_tensor(s["label"]).long() for s in samples])}

    def make_evaluator(self):
        return SegEvaluator(num_classes=self.out_channels, ignore_index=IGNORE)

    def update_evaluator(self, evaluator, maps, glob, tgt, index):
        evaluator.update(maps.float(), tgt["label"], index=index)

    def linear_targets(self, tgt):
        # one-hot scaled to a logit margin; ignored pixels are all-zero (no class preferred)
        label = tgt["label"]
        onehot = F.one_hot(label.clamp_max(self.out_channels - 1), self.out_channels).permute(0, 3, 1, 2)
        return (onehot * (label != IGNORE)[:, None]).float() * self.settings.logit_margin


@register_loss("cross_entropy_dice", task="seg", default_weights={"ce": 1.0, "dice": 0.0})
def cross_entropy_dice(task: SegTask, maps, glob, tgt) -> dict:
    """Cross-entropy (ignore 255) and soft Dice over the 29 classes, on the loss grid."""
    n_cls = task.out_channels
    st = task.protocol.loss_stride
    logits = loss_grid(maps, tgt["label"].shape[-2:], st, task.loss_offset)
    label = subsample(tgt["label"], st, task.loss_offset)
    valid = label != IGNORE
    ce = F.cross_entropy(logits, label.clamp_max(n_cls - 1) * valid, reduction="none")
    n_valid = valid.flatten(1).sum(1).clamp_min(1)
    ce = ((ce * valid).flatten(1).sum(1) / n_valid).mean()
    prob = logits.softmax(1) * valid[:, None]
    onehot = F.one_hot(label.clamp_max(n_cls - 1), n_cls).permute(0, 3, 1, 2)
    onehot = onehot * valid[:, None]
    inter = (prob * onehot).flatten(2).sum(2)
    denom = prob.flatten(2).sum(2) + onehot.flatten(2).sum(2)
    dice = (1 - (2 * inter + 1) / (denom + 1)).mean()
    return {"ce": ce, "dice": dice}
