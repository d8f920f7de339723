"""Pointmap probe: the canonical (focal-normalised) camera-frame pointmap in metres.

The GT pointmap (camera frame, metres) is canonicalised to focal length ``f_c`` (768):
``P_c = P * f_c / fx``, and scored against the prediction by ``PointmapEvaluator`` on the GT mask.
The read-out regresses ``P_c`` itself: a split into ``P_c / s`` and a per-image ``log s`` from pooled
features is not linear in features that hold the points linearly (docs/probing.md).
The task is ``masked`` (:meth:`ProbeTask.linear_targets`): the feature-free floor is the per-pixel
train mean of ``P_c`` over the masks that cover that pixel. Images may differ in size: the read-out
sees every image at the protocol's input size (``P_c``, per-pixel points canonicalised with the image's
own ``fx``, resized mask-aware for training only), and each test image is scored at its native size
(:func:`~benchmarks.probe.tasks.base.dense_targets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import (
    ProbeTask,
    dense_targets,
    gradient_l1,
    loss_grid,
    native_views,
    per_sample_masked_mean,
    register_probe_task,
    resize_to,
    subsample,
)
from benchmarks.probe.train.losses import register_loss
from evaluators.base import Evaluator
from evaluators.pointmap import PointmapEvaluator


@dataclass(frozen=True)
class PointmapSettings(TaskSettings):
    """Pointmap settings: full resolution, L1 + gradient L1 + scale.

    Args:
        canonical_focal_length: pointmaps are compared in camera coordinates scaled by ``f_c / fx``.
    """

    output_stride: int = 1
    masked_readout: str = "mask-and-prior-shrunk"
    loss: str = "pointmap_l1_grad_scale"
    loss_weights: dict = field(default_factory=lambda: {"l1": 1.0, "grad": 1.0, "scale": 1.0})
    canonical_focal_length: float = 768.0


@register_probe_task
class PointmapTask(ProbeTask):
    """Canonical camera-frame pointmap (metres at focal ``f_c``)."""

    name = "pointmap"
    settings_class = PointmapSettings
    out_channels = 3
    masked = True
    required_keys = ("pointmap", "mask", "K")

    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        fc = self.settings.canonical_focal_length
        pts, masks = [], []
        for s in samples:
            if s.get("pointmap_canonical") is not None and fc == 768.0:
                p = torch.as_tensor(s["pointmap_canonical"]).float()
            else:
                p = torch.as_tensor(s["pointmap"]).float() * (fc / float(torch.as_tensor(s["K"])[0, 0]))
            m = torch.as_tensor(s["mask"]).bool() & torch.isfinite(p).all(0) & (p[2] > 0)
            pts.append(torch.where(m[None], p, torch.zeros_like(p)))
            masks.append(m)
        out = dense_targets(self.name, samples, {"pointmap": pts}, masks, tuple(self.protocol.input_size))
        scale = per_sample_masked_mean(out["pointmap"][:, 2:3], out["mask"]).clamp_min(1e-3)
        return {**out, "log_scale": scale.log()}

    def predict(self, maps: torch.Tensor, glob: torch.Tensor | None, size: Sequence[int]) -> torch.Tensor:
        return resize_to(maps.float(), size)

    def make_evaluator(self) -> Evaluator:
        return PointmapEvaluator()

    def update_evaluator(self, evaluator: Evaluator, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                         index: torch.Tensor) -> None:
        # zero off the GT mask, as the GT pointmap is: the official Sobel normals at the mask edge
        # read the background, so a filled background would cost the oracle its exact normals
        if "native_size" not in tgt:
            pred = self.predict(maps, glob, tgt["pointmap"].shape[-2:]) * tgt["mask"][:, None]
            evaluator.update(pred, tgt["pointmap"], tgt["mask"], index=index)
            return
        for one, gt, idx in native_views(tgt, ("pointmap",), index):  # several sizes: each at its own
            pred = self.predict(maps[one], glob, gt["pointmap"].shape[-2:]) * gt["mask"][:, None]
            evaluator.update(pred, gt["pointmap"], gt["mask"], index=idx)

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        # mask * P_c (P_c is already 0 off the mask) and the mask: a masked task
        m = tgt["mask"][:, None].to(tgt["pointmap"].dtype)
        return torch.cat([tgt["pointmap"] * m, m], dim=1)



@register_loss(
    "pointmap_l1_grad_scale", task="pointmap", default_weights={"l1": 1.0, "grad": 0.0, "scale": 1.0}
)
def pointmap_l1_grad_scale(task: PointmapTask, maps: torch.Tensor, glob: torch.Tensor | None,
                           tgt: dict) -> dict:
    """L1 and gradient L1 of the canonical pointmap (metres) on GT-mask pixels, and the abs error of
    the log of its mean depth over the mask (the scale)."""
    st = task.protocol.loss_stride
    pred = loss_grid(maps, tgt["pointmap"].shape[-2:], st, task.loss_offset)
    gt, mask = (
        subsample(tgt["pointmap"], st, task.loss_offset),
        subsample(tgt["mask"], st, task.loss_offset),
    )
    l1 = per_sample_masked_mean((pred - gt).abs(), mask).mean()
    grad = gradient_l1(pred, gt, mask).mean()
    depth = per_sample_masked_mean(pred[:, 2:3], mask).clamp_min(1e-3)
    scale = (depth.log() - tgt["log_scale"]).abs().mean()
    return {"l1": l1, "grad": grad, "scale": scale}
