"""Segmentation probe: per-class logits, cross-entropy + Dice, scored by ``SegEvaluator``.

One logit map per class of the split's label set (Sapiens2's 29 body parts by default; the reader's
``label_set``, e.g. ``person2`` for COCO person masks). Images may differ in size: the read-out sees
every image at the protocol's input size, and each test image is scored at its native size (see
:meth:`SegTask.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import ProbeTask, VocabularySpec, loss_grid, register_probe_task, subsample
from benchmarks.probe.train.losses import register_loss
from evaluators.base import Evaluator
from evaluators.seg import SegEvaluator
from sapiens2.vocab import label_set

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView

IGNORE = 255  # the default label set's ignore index
DEFAULT_LABEL_SET = "sapiens2_29"


@dataclass(frozen=True)
class SegSettings(TaskSettings):
    """Segmentation settings: logits at full resolution, cross-entropy + Dice.

    Args:
        logit_margin: the shortcut regresses the one-hot labels times this margin.
        label_set: the label set (built-in name, or the id a record names; "": the data's, or
            ``sapiens2_29`` for data that names none); the probe fills it in from the data.
    """

    output_stride: int = 1
    loss: str = "cross_entropy_dice"
    loss_weights: dict = field(default_factory=lambda: {"ce": 1.0, "dice": 0.5})
    logit_margin: float = 10.0
    label_set: str = ""

    VOCABULARY_FIELD: ClassVar[str] = "label_set"


@register_probe_task
class SegTask(ProbeTask):
    """Per-pixel class logits at the output stride, resized bilinearly to each GT's native size."""

    name = "seg"
    settings_class = SegSettings
    out_channels = 29
    ignore_index = IGNORE
    required_keys = ("label",)
    vocabulary_kind = "label_set"
    default_vocabulary = DEFAULT_LABEL_SET

    def __init__(self, protocol: ProtocolView):
        super().__init__(protocol)
        self.use_vocabulary(None)

    def use_vocabulary(self, vocab: VocabularySpec = None) -> None:
        """One logit map per class of ``vocab`` (a LabelSet, name or JSON; None: the settings')."""
        self.label_set = self._resolve_vocabulary(vocab, label_set)
        self.out_channels, self.ignore_index = self.label_set.num_classes, self.label_set.ignore_index

    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        """``label``: B x H x W labels at the protocol's input size. A label map of that size is used
        as it is; any other is resized (nearest) to it, the size the read-out sees every image at, for
        training only, and scoring uses ``native`` (each native label map, padded with the ignore
        index to the largest size; the padding is never scored) and ``native_size`` (B x 2: each map's
        own H, W). Which happens depends on each sample alone, never on the batch it is read in."""
        labels = [torch.as_tensor(s["label"]).long() for s in samples]
        sizes = torch.tensor([tuple(lb.shape[-2:]) for lb in labels], dtype=torch.int64)
        size = tuple(self.protocol.input_size)
        if all(tuple(lb.shape[-2:]) == size for lb in labels):
            return {"label": torch.stack(labels)}
        hmax, wmax = (int(v) for v in sizes.amax(0))
        native = torch.full((len(labels), hmax, wmax), self.ignore_index, dtype=torch.int64)
        for i, lb in enumerate(labels):
            native[i, : lb.shape[-2], : lb.shape[-1]] = lb
        train = torch.stack([
            F.interpolate(lb[None, None].float(), size=size, mode="nearest")[0, 0].long() for lb in labels
        ])
        return {"label": train, "native": native, "native_size": sizes}

    def make_evaluator(self) -> Evaluator:
        return SegEvaluator(label_set=self.label_set)

    def update_evaluator(self, evaluator: Evaluator, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                         index: torch.Tensor) -> None:
        if "native" not in tgt:
            evaluator.update(maps.float(), tgt["label"], index=index)
            return
        # images of several sizes: each image's logits resized to its own native size (the inverse of
        # the input resize), scored against its unpadded native labels
        index = torch.as_tensor(index)
        for i, (h, w) in enumerate(tgt["native_size"].tolist()):
            one = slice(i, i + 1)
            evaluator.update(maps[one].float(), tgt["native"][one, :h, :w], index=index[one])

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        # one-hot scaled to a logit margin; ignored pixels are all-zero (no class preferred)
        label = tgt["label"]
        out = torch.zeros(label.shape[0], self.out_channels, *label.shape[1:], device=label.device)
        # scattered in float32 (an int64 one-hot is 8 bytes per class and pixel, then converted)
        out.scatter_(1, label.clamp_max(self.out_channels - 1)[:, None], float(self.settings.logit_margin))
        return out * (label != self.ignore_index)[:, None]


@register_loss("cross_entropy_dice", task="seg", default_weights={"ce": 1.0, "dice": 0.0})
def cross_entropy_dice(task: SegTask, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict) -> dict:
    """Cross-entropy (ignoring the label set's ignore index) and soft Dice over its classes, on the loss
    grid."""
    n_cls = task.out_channels
    st = task.protocol.loss_stride
    logits = loss_grid(maps, tgt["label"].shape[-2:], st, task.loss_offset)
    label = subsample(tgt["label"], st, task.loss_offset)
    valid = label != task.ignore_index
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
