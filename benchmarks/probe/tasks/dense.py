"""The base of a dense task scored on its ground-truth mask: targets, read-out targets and native-size
scoring from a few class fields.

A subclass names its ground-truth key and channel count (and, when it needs them, a value range, a
unit-length flag and a ground-truth function); everything else is here, written once:

- the targets: each sample's map and mask at the protocol's input size for the read-out (resized
  mask-aware when the image has another size, :func:`~benchmarks.probe.tasks.base.dense_targets`), and
  the native maps for scoring;
- the read-out targets ``[mask * t, mask]`` of a ``masked`` task (:meth:`ProbeTask.linear_targets`);
- the scoring: the prediction resized to each test image's own native size and clamped to the value
  range, against that image's native ground truth (never a resized copy of it), by the evaluator the
  task table names (:func:`evaluators.registry.build_evaluator`).

A probe-only task (no loss, no task model) leaves the settings' ``loss`` empty: the closed-form linear
read-out needs none. Example (a complete task; ``docs/adding_a_task.md`` has a runnable one):

    @register_probe_task
    class DepthTask(MaskedDenseTask):
        name, settings_class, gt_key, out_channels = "depth", DepthSettings, "depth", 1
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import ProbeTask, dense_targets, native_views, resize_to
from evaluators.base import Evaluator
from evaluators.registry import build_evaluator


@dataclass(frozen=True)
class MaskedDenseSettings(TaskSettings):
    """The settings of a masked dense task: the read-out form every masked task takes by default."""

    masked_readout: str = "mask-and-prior-shrunk"


class MaskedDenseTask(ProbeTask):
    """A per-pixel regression task scored on the ground-truth mask, at each image's native size.

    Attributes:
        gt_key: the reader's sample key of the C x H x W ground-truth map (``out_channels`` = C).
        mask_key: the sample key of the H x W valid-pixel mask.
        value_range: predictions are clamped to ``(low, high)`` before scoring (None: not clamped).
        unit_length: the map holds unit vectors: a resized training map is renormalised to unit length.
        zero_off_mask: predictions are set to 0 off the ground-truth mask before scoring (for an
            evaluator that reads neighbouring pixels, as the ground truth is 0 there).
    """

    masked = True
    gt_key = ""
    mask_key = "mask"
    value_range: tuple[float, float] | None = None
    unit_length = False
    zero_off_mask = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.gt_key and not cls.required_keys:
            cls.required_keys = (cls.gt_key, cls.mask_key)

    def ground_truth(self, sample: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """One sample's (C x H x W float map, H x W bool mask); a task deriving its map overrides this.

        Returns the map as read and the sample's mask as it is (the evaluator skips what it cannot score).
        """
        return torch.as_tensor(sample[self.gt_key]).float(), torch.as_tensor(sample[self.mask_key]).bool()

    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        maps, masks = zip(*(self.ground_truth(s) for s in samples))
        return dense_targets(self.name, samples, {self.gt_key: list(maps)}, list(masks),
                             tuple(self.protocol.input_size), unit=(self.gt_key,) if self.unit_length else ())

    def predict(self, maps: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """Decoder maps resized to ``size`` (H, W) and clamped to :attr:`value_range`."""
        pred = resize_to(maps.float(), size)
        return pred if self.value_range is None else pred.clamp(*self.value_range)

    def make_evaluator(self) -> Evaluator:
        return build_evaluator(self.name)

    def update_evaluator(self, evaluator: Evaluator, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                         index: torch.Tensor) -> None:
        key = self.gt_key
        if "native_size" in tgt:  # images of other sizes than the input: each scored at its own
            views = native_views(tgt, (key,), index)
        else:
            views = [(slice(None), {key: tgt[key], "mask": tgt["mask"]}, index)]
        for rows, gt, idx in views:
            pred = self.predict(maps[rows], gt[key].shape[-2:])
            if self.zero_off_mask:
                pred = pred * gt["mask"][:, None]
            evaluator.update(pred, gt[key], gt["mask"], index=idx)

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        m = tgt["mask"][:, None].to(tgt[self.gt_key].dtype)
        return torch.cat([tgt[self.gt_key] * m, m], dim=1)
