"""Pointmap probe: a canonical (focal-normalised, unit-mean-depth) pointmap plus a global scale.

The GT pointmap (camera frame, metres) is canonicalised to focal length ``f_c`` (768):
``P_c = P * f_c / fx``. The target splits into ``P~ = P_c / s`` with ``s`` the mean depth over the mask,
and ``log s``. The decoder predicts ``P~`` (3 maps) and ``log s`` (global branch); the prediction is
``exp(log s) * P~``, scored against ``P_c`` by ``PointmapEvaluator`` on the GT mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from benchmarks.probe.losses import register_loss
from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import (
    ProbeTask,
    gradient_l1,
    loss_grid,
    per_sample_masked_mean,
    register_probe_task,
    resize_to,
    subsample,
)
from evaluators.pointmap import PointmapEvaluator


@dataclass(frozen=True)
class PointmapSettings(TaskSettings):
    """Pointmap settings: full resolution, L1 + gradient L1 + scale.

    Args:
        canonical_focal_length: pointmaps are compared in camera coordinates scaled by ``f_c / fx``.
    """

    output_stride: int = 1
    loss: str = "pointmap_l1_grad_scale"
    loss_weights: dict = field(default_factory=lambda: {"l1": 1.0, "grad": 1.0, "scale": 1.0})
    canonical_focal_length: float = 768.0


@register_probe_task
class PointmapTask(ProbeTask):
    """Canonical pointmap and scale."""

    name = "pointmap"
    settings_class = PointmapSettings
    out_channels = 3
    global_channels = 1
    required_keys = ("pointmap", "mask", "K")

    def targets(self, samples):
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
        pc, mask = torch.stack(pts), torch.stack(masks)
        scale = per_sample_masked_mean(pc[:, 2:3], mask).clamp_min(1e-3)
        return {"pointmap": pc, "mask": mask, "log_scale": scale.log()}

    def predict(self, maps, glob, size):
        return resize_to(maps.float(), size) * glob[:, :1, None, None].float().exp()

    def global_prior(self, targets):
        # the scale branch starts at the train-set mean log scale instead of log s = 0 (s = 1 m)
        return targets["log_scale"].float().mean().reshape(1)

    def make_evaluator(self):
        return PointmapEvaluator()

    def update_evaluator(self, evaluator, maps, glob, tgt, index):
        pred = self.predict(maps, glob, tgt["pointmap"].shape[-2:])
        evaluator.update(pred, tgt["pointmap"], tgt["mask"], index=index)

    def linear_targets(self, tgt):
        # canonical pointmap P / s (zero outside the mask); the scale is the global branch's target
        return tgt["pointmap"] / tgt["log_scale"].exp()[:, None, None, None]

    def global_targets(self, tgt):
        return tgt["log_scale"][:, None]


@register_loss(
    "pointmap_l1_grad_scale", task="pointmap", default_weights={"l1": 1.0, "grad": 0.0, "scale": 1.0}
)
def pointmap_l1_grad_scale(task: PointmapTask, maps, glob, tgt) -> dict:
    """L1 and gradient L1 of the canonical pointmap on GT-mask pixels, and abs(log s error)."""
    st = task.protocol.loss_stride
    log_s = tgt["log_scale"]
    pred_c = loss_grid(maps, tgt["pointmap"].shape[-2:], st, task.loss_offset)
    gt, mask = (
        subsample(tgt["pointmap"], st, task.loss_offset),
        subsample(tgt["mask"], st, task.loss_offset),
    )
    gt_c = gt / log_s.exp()[:, None, None, None]
    l1 = per_sample_masked_mean((pred_c - gt_c).abs(), mask).mean()
    grad = gradient_l1(pred_c, gt_c, mask).mean()
    scale = (glob[:, 0] - log_s).abs().mean()
    return {"l1": l1, "grad": grad, "scale": scale}
