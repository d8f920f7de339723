"""A sixth task as a plug-in: its task spec, reader, evaluator and probe task, each registering itself.

``toy_grey``: the per-pixel grey level (mean of the RGB albedo) inside the person mask, in [0, 1],
scored by the mean absolute error. Importing this module registers the four parts in the project's
registries (``sapiens2.tasks``, ``DATASETS``, ``EVALUATORS``, ``PROBE_TASKS``) and the toy's loss;
no file of the project lists it. :func:`unregister` removes them again (tests call it when done).
:func:`write_split` writes a split folder in the reader's format from the in-memory toy scenes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks import ProbeTask, register_probe_task, unregister_probe_task
from benchmarks.probe.tasks.base import loss_grid, per_sample_masked_mean, resize_to, subsample
from benchmarks.probe.train.losses import LOSSES, register_loss
from evaluators.base import Evaluator
from evaluators.metric_decl import MetricDecl
from evaluators.registry import EVALUATORS
from sapiens2.datasets.base import ManifestDataset
from sapiens2.datasets.io import read_mask
from sapiens2.registry import DATASETS
from sapiens2.tasks import Feed, TaskSpec, register_task, unregister_task

NAME = "toy_grey"

# 1. the task spec (it has no task model: the albedo model's names stand in for the fields)
SPEC = register_task(TaskSpec(
    name=NAME, dataset="ToyGreyDataset", estimator="AlbedoEstimator", head="AlbedoHead",
    evaluator="ToyGreyEvaluator", feed=Feed("dense", gt_key="grey", mask_key="mask"), prediction_key="grey",
    headline="grey_mae", visualiser="draw_albedo", value_kind="unit",
))


# 2. the reader
@DATASETS.register_module()
class ToyGreyDataset(ManifestDataset):
    """Image + grey-level map (``.npy``, H x W float in [0, 1]) + mask PNG."""

    task = NAME
    file_keys = ("grey", "mask")

    def __getitem__(self, index: int) -> dict:
        rec, sample, img = self._base_sample(index)
        grey = np.load(self.path(rec, "grey")).astype(np.float32)
        if grey.shape != img.shape[:2] or not np.isfinite(grey).all() or grey.min() < 0 or grey.max() > 1:
            raise ValueError(f"{self.path(rec, 'grey')}: expected an H x W map in [0, 1] at the image size")
        sample["grey"] = torch.from_numpy(grey)[None]
        sample["mask"] = torch.from_numpy(read_mask(self.path(rec, "mask"), self._rec(rec)))
        return sample


# 3. the evaluator
@EVALUATORS.register_module()
class ToyGreyEvaluator(Evaluator):
    """Mean absolute grey-level error over the mask pixels of every image."""

    task = NAME
    bootstrap_states = ("abs_err", "pixels")
    metrics = (MetricDecl("grey_mae", "grey MAE", False, "data range", bootstrapped=True, interval=True,
                          headline_ok=True),)

    def __init__(self):
        super().__init__()
        self.add_state("abs_err", torch.zeros((), dtype=torch.float64))
        self.add_state("pixels", torch.zeros((), dtype=torch.float64))

    def batch_stats(self, pred, gt, mask):
        m = mask.to(torch.float64)
        err = (pred.double() - gt.double()).abs().mean(1) * m
        return {"abs_err": err.flatten(1).sum(1), "pixels": m.flatten(1).sum(1)}

    def compute_from_state(self, s):
        return {"grey_mae": float(s["abs_err"] / s["pixels"].clamp_min(1.0))}

    def _bootstrap_values(self, s, keys):
        return {"grey_mae": s["abs_err"] / np.maximum(s["pixels"], 1.0)}


# 4. the probe task, with its settings class and defaults, and its loss
@dataclass(frozen=True)
class ToyGreySettings(TaskSettings):
    """Toy settings: full resolution, L1.

    Args:
        clip: predictions are clamped to ``[0, clip]`` before scoring.
    """

    output_stride: int = 1
    loss: str = "grey_l1"
    clip: float = 1.0


@register_probe_task
class ToyGreyTask(ProbeTask):
    """Grey level regressed linearly, clamped, scored by ``ToyGreyEvaluator`` on the mask."""

    name = NAME
    settings_class = ToyGreySettings
    out_channels = 1
    required_keys = ("grey", "mask")

    def targets(self, samples):
        return {
            "grey": torch.stack([torch.as_tensor(s["grey"]).float() for s in samples]),
            "mask": torch.stack([torch.as_tensor(s["mask"]).bool() for s in samples]),
        }

    def make_evaluator(self):
        return ToyGreyEvaluator()

    def update_evaluator(self, evaluator, maps, glob, tgt, index):
        pred = resize_to(maps.float(), tgt["grey"].shape[-2:]).clamp(0.0, self.settings.clip)
        evaluator.update(pred, tgt["grey"], tgt["mask"], index=index)

    def linear_targets(self, tgt):
        return tgt["grey"] * tgt["mask"][:, None]


@register_loss("grey_l1", task=NAME, default_weights={"l1": 1.0})
def grey_l1(task: ToyGreyTask, maps, glob, tgt) -> dict:
    """L1 of the grey level on the mask pixels of the loss grid."""
    st = task.protocol.loss_stride
    pred = loss_grid(maps.float(), tgt["grey"].shape[-2:], st, task.loss_offset)
    gt, mask = subsample(tgt["grey"], st, task.loss_offset), subsample(tgt["mask"], st, task.loss_offset)
    return {"l1": per_sample_masked_mean((pred - gt).abs(), mask).mean()}


def unregister() -> None:
    """Remove the toy's four registrations and its loss."""
    unregister_task(NAME)
    unregister_probe_task(NAME)
    DATASETS.module_dict.pop("ToyGreyDataset", None)
    EVALUATORS.module_dict.pop("ToyGreyEvaluator", None)
    LOSSES.pop((NAME, "grey_l1"), None)


def write_split(root: Path, scenes: list[dict]) -> Path:
    """A split folder with the toy task's manifest, from toy scenes (``_probe_toy``'s sample dicts)."""
    root.mkdir(parents=True)
    for sub in ("images", "grey", "mask"):
        (root / sub).mkdir()
    records = []
    for s in scenes:
        sid = s["id"]
        image = (s["image"].permute(1, 2, 0).numpy() * 255).round().clip(0, 255).astype(np.uint8)
        Image.fromarray(image).save(root / "images" / f"{sid}.png")
        Image.fromarray(s["mask"].numpy().astype(np.uint8) * 255).save(root / "mask" / f"{sid}.png")
        np.save(root / "grey" / f"{sid}.npy", s["albedo"].mean(0).numpy().astype(np.float32))
        records.append({"id": sid, "image": f"images/{sid}.png", "grey": f"grey/{sid}.npy",
                        "mask": f"mask/{sid}.png"})
    import json

    (root / f"{NAME}.json").write_text(json.dumps({"task": NAME, "format_version": 1, "records": records}))
    (root / "split.json").write_text(json.dumps({"name": root.name, "tasks": {NAME: f"{NAME}.json"}}))
    return root
