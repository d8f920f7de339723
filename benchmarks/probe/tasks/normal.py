"""Surface-normal probe: 3 channels, L2-normalised; (1 - cos) + L1 loss on GT-mask pixels.

Images may differ in size: the read-out sees every image at the protocol's input size (the GT resized
mask-aware and renormalised, for training only), and each test image is scored at its native size
(:func:`~benchmarks.probe.tasks.base.dense_targets`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import (
    ProbeTask,
    dense_targets,
    loss_grid,
    native_views,
    per_sample_masked_mean,
    register_probe_task,
    subsample,
)
from benchmarks.probe.train.losses import register_loss
from evaluators.base import Evaluator
from evaluators.normal import NormalEvaluator


@dataclass(frozen=True)
class NormalSettings(TaskSettings):
    """Normal settings: full resolution, (1 - cos) + L1."""

    output_stride: int = 1
    masked_readout: str = "mask-and-prior-shrunk"
    loss: str = "cosine_l1"
    loss_weights: dict = field(default_factory=lambda: {"cos": 1.0, "l1": 1.0})


@register_probe_task
class NormalTask(ProbeTask):
    """Camera-frame unit normals, scored by ``NormalEvaluator`` on the GT mask."""

    name = "normal"
    settings_class = NormalSettings
    out_channels = 3
    masked = True
    required_keys = ("normal", "mask")

    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        normals = [torch.as_tensor(s["normal"]).float() for s in samples]
        masks = [torch.as_tensor(s["mask"]).bool() for s in samples]
        return dense_targets(self.name, samples, {"normal": normals}, masks, tuple(self.protocol.input_size),
                             unit=("normal",))

    def make_evaluator(self) -> Evaluator:
        return NormalEvaluator()

    def update_evaluator(self, evaluator: Evaluator, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                         index: torch.Tensor) -> None:
        pred = F.normalize(maps.float(), dim=1, eps=1e-6)
        if "native_size" not in tgt:
            evaluator.update(pred, tgt["normal"], tgt["mask"], index=index)
            return
        for one, gt, idx in native_views(tgt, ("normal",), index):  # several sizes: each at its own
            evaluator.update(pred[one], gt["normal"], gt["mask"], index=idx)

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        # mask * normal and the mask: a masked task (off the mask: the per-pixel train mean normal)
        m = tgt["mask"][:, None].to(tgt["normal"].dtype)
        return torch.cat([tgt["normal"] * m, m], dim=1)



@register_loss("cosine_l1", task="normal", default_weights={"cos": 1.0, "l1": 1.0})
def cosine_l1(task: NormalTask, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict) -> dict:
    """(1 - cos) and L1 between the L2-normalised prediction and the GT normal, on GT-mask pixels."""
    st = task.protocol.loss_stride
    pred = F.normalize(loss_grid(maps, tgt["normal"].shape[-2:], st, task.loss_offset), dim=1, eps=1e-6)
    gt, mask = (
        subsample(tgt["normal"], st, task.loss_offset),
        subsample(tgt["mask"], st, task.loss_offset),
    )
    cos = per_sample_masked_mean(1 - (pred * gt).sum(1), mask).mean()
    l1 = per_sample_masked_mean((pred - gt).abs(), mask).mean()
    return {"cos": cos, "l1": l1}
