"""A sixth task as a plug-in (docs/adding_a_task.md): camera-frame depth in metres, written from the
pointmaps, probed by the closed-form linear read-out and scored by AbsRel at each image's own size.
Load it with ``sapiens2-bench --include docs/examples/depth_task.py ...``."""

from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.probe.tasks import register_probe_task
from benchmarks.probe.tasks.dense import MaskedDenseSettings, MaskedDenseTask
from evaluators.base import Evaluator
from evaluators.metric_decl import MetricDecl
from evaluators.registry import EVALUATORS
from sapiens2.datasets.base import ManifestDataset
from sapiens2.datasets.io import DatasetError, read_npy
from sapiens2.registry import DATASETS
from sapiens2.tasks import Feed, TaskSpec, register_task


def write_depth(scene, root, sid):
    """The ground truth, from a rendered scene or an existing split's pointmaps: z on the mask, else 0."""
    (root / "depth").mkdir(exist_ok=True)
    np.save(root / "depth" / f"{sid}.npy", np.where(scene["mask"], scene["pointmap"][..., 2], 0).astype("f4"))
    return {"depth": f"depth/{sid}.npy"}


register_task(TaskSpec(name="depth", dataset="DepthDataset", evaluator="DepthEvaluator", headline="abs_rel",
                       feed=Feed("dense", gt_key="depth", mask_key="mask"), value_kind="float",
                       write_ground_truth=write_depth))


@DATASETS.register_module()
class DepthDataset(ManifestDataset):
    """Image + depth map (``.npy``, H x W metres; 0 where there is no ground truth)."""

    task, file_keys = "depth", ("depth",)

    def __getitem__(self, index):
        rec, sample, img = self._base_sample(index)
        depth = read_npy(self.path(rec, "depth"), self._rec(rec))
        if depth.shape != img.shape[:2] or not np.isfinite(depth).all() or depth.min() < 0:
            raise DatasetError(f"{self.path(rec, 'depth')}: expected H x W depths >= 0 at the image size")
        sample["depth"] = torch.from_numpy(depth.astype(np.float32))[None]
        sample["mask"] = sample["depth"][0] > 0
        return sample


@EVALUATORS.register_module()
class DepthEvaluator(Evaluator):
    """AbsRel, |pred - gt| / gt averaged over the ground-truth pixels of every image."""

    task, bootstrap_states = "depth", ("abs_rel", "pixels")
    metrics = (MetricDecl("abs_rel", "AbsRel %", False, unit="fraction", scale=100.0, bootstrapped=True,
                          interval=True, headline_ok=True),)

    def __init__(self):
        super().__init__()
        self.add_state("abs_rel", torch.zeros((), dtype=torch.float64))
        self.add_state("pixels", torch.zeros((), dtype=torch.float64))

    def batch_stats(self, pred, gt, mask):
        gt, m = gt[:, 0].double(), mask.double()
        rel = (pred[:, 0].double() - gt).abs() / gt.clamp_min(1e-6) * m
        return {"abs_rel": rel.flatten(1).sum(1), "pixels": m.flatten(1).sum(1)}

    def compute_from_state(self, s):
        return {"abs_rel": float(s["abs_rel"] / s["pixels"].clamp_min(1.0))}

    def _bootstrap_values(self, s, keys):
        return {"abs_rel": s["abs_rel"] / np.maximum(s["pixels"], 1.0)}


@dataclass(frozen=True)
class DepthSettings(MaskedDenseSettings):
    """Full-resolution output; no loss: the linear read-out trains nothing."""

    output_stride: int = 1


@register_probe_task
class DepthTask(MaskedDenseTask):
    """Depth regressed linearly from the features, scored on the mask at each image's native size."""

    name, settings_class, gt_key, out_channels = "depth", DepthSettings, "depth", 1
