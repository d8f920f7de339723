"""mmengine ``BaseMetric`` adapters of the dense evaluators, registered in ``sapiens2.registry.METRICS``.

A config of mmengine, mmseg or mmpose names them with the scope prefix, e.g.
``val_evaluator = dict(type='sapiens2.SegMetric')``. Each adapter wraps one streaming evaluator:
``process`` updates it batch by batch (no per-sample results are stored), and ``evaluate`` syncs it
across ranks and returns its float metrics under ``<prefix>/<name>`` (default prefix: the task
name); the conventions stay on ``metric.last_conventions``.

Data samples (dicts, or mmengine data elements, whose tensors may be wrapped as ``{"data": t}``):

* ``SegMetric``: ``pred_sem_seg`` (1 x H x W labels; scored first, as mmseg's ``IoUMetric`` does) or,
  without it, ``seg_logits`` (C x h x w, resized and argmaxed; 1 x h x w: a binary model's logits,
  ``sigmoid > 0.3``), and ``gt_sem_seg`` (1 x H x W) -- the mmseg ``SegDataSample`` layout;
* ``NormalMetric`` / ``PointmapMetric`` / ``AlbedoMetric``: ``pred_<task>`` (3 x h x w),
  ``gt_<task>`` (C x H x W) and ``mask`` (H x W or 1 x H x W).

Dedup under DDP: a data sample's ``sample_idx`` (mmengine datasets add it to the data info; put it
in the packing transform's ``meta_keys``) keys the sample, so padded duplicates count once. Without
it samples are not deduplicated (a warning is logged once under DDP).

Example:
    >>> import torch
    >>> from mmengine.evaluator import Evaluator as MMEvaluator
    >>> ev = MMEvaluator(dict(type="sapiens2.SegMetric", num_classes=2))
    >>> gt = torch.tensor([[[0, 1], [1, 1]]])
    >>> ev.process([{"pred_sem_seg": {"data": gt}, "gt_sem_seg": {"data": gt}, "sample_idx": 0}])
    >>> ev.evaluate(1)["seg/mIoU"]
    100.0
"""

from __future__ import annotations

import logging

import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from evaluators.albedo import AlbedoEvaluator
from evaluators.normal import NormalEvaluator
from evaluators.pointmap import PointmapEvaluator
from evaluators.registry import METRICS
from evaluators.seg import SegEvaluator
from sapiens2 import distributed as D


def _get(sample, key: str):
    """``sample[key]`` unwrapped from mmengine data elements / ``{"data": tensor}``; None if absent."""
    if hasattr(sample, "to_dict") and not isinstance(sample, dict):
        sample = sample.to_dict()
    val = sample.get(key) if isinstance(sample, dict) else None
    if val is None and isinstance(sample, dict) and isinstance(sample.get("metainfo"), dict):
        val = sample["metainfo"].get(key)
    if hasattr(val, "to_dict") and not isinstance(val, dict):
        val = val.to_dict()
    if isinstance(val, dict) and "data" in val:
        val = val["data"]
    return val


def _stack(samples: list, key: str, where: str) -> torch.Tensor:
    vals = [_get(s, key) for s in samples]
    missing = [i for i, v in enumerate(vals) if v is None]
    if missing:
        raise KeyError(f"{where}: data samples {missing[:5]} lack {key!r}")
    vals = [torch.as_tensor(v) for v in vals]
    shapes = {tuple(v.shape) for v in vals}
    if len(shapes) > 1:
        raise ValueError(f"{where}: {key!r} shapes differ within the batch: {sorted(shapes)}")
    return torch.stack(vals)


class _DenseMetric(BaseMetric):
    """Shared adapter logic; subclasses set ``evaluator_cls`` and implement ``_update``."""

    evaluator_cls = None
    default_prefix = None

    def __init__(self, collect_device: str = "cpu", prefix: str | None = None, **evaluator_kwargs) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.evaluator = self.evaluator_cls(**evaluator_kwargs)
        self.last_conventions: dict = {}
        self._warned = False

    def _indices(self, samples: list):
        idx = [_get(s, "sample_idx") for s in samples]
        if all(i is not None for i in idx):
            return [int(i) for i in idx]
        if D.is_distributed() and not self._warned:
            print_log(
                f"{type(self).__name__}: data samples carry no 'sample_idx'; samples padded in by the "
                "distributed sampler are counted twice",
                logger="current",
                level=logging.WARNING,
            )
            self._warned = True
        return None

    def _groups(self, samples: list, key: str) -> list[list]:
        """Split the batch into runs of samples whose ``key`` tensors share a shape."""
        groups: list[list] = []
        last = None
        for s in samples:
            v = _get(s, key)
            shape = tuple(torch.as_tensor(v).shape) if v is not None else None
            if groups and shape == last:
                groups[-1].append(s)
            else:
                groups.append([s])
                last = shape
        return groups

    def process(self, data_batch, data_samples) -> None:
        """Update the wrapped evaluator with one batch of data samples."""
        samples = list(data_samples)
        for group in self._groups(samples, self._shape_key()):
            self._update(group, self._indices(group))

    def evaluate(self, size: int) -> dict:
        """Sync across ranks, compute, reset; returns the float metrics (prefixed when ``prefix`` is set)."""
        self.evaluator.sync()
        res = self.evaluator.compute()
        self.evaluator.reset()
        self.last_conventions = res.pop("conventions", {})
        self.last_per_class = res.pop("per_class", None)
        metrics = {k: float(v) for k, v in res.items()}
        if self.prefix:
            metrics = {f"{self.prefix}/{k}": v for k, v in metrics.items()}
        return metrics

    def compute_metrics(self, results: list) -> dict:
        """Unused: :meth:`evaluate` computes from the streaming evaluator directly."""
        return self.evaluator.compute()

    def _shape_key(self) -> str:
        raise NotImplementedError

    def _update(self, samples: list, index) -> None:
        raise NotImplementedError


@METRICS.register_module()
class SegMetric(_DenseMetric):
    """Seg adapter (``SegEvaluator`` kwargs: num_classes, ignore_index, nan_to_num, beta, class_names)."""

    evaluator_cls = SegEvaluator
    default_prefix = "seg"

    def _shape_key(self) -> str:
        return "gt_sem_seg"

    def _update(self, samples, index) -> None:
        where = type(self).__name__
        gt = _stack(samples, "gt_sem_seg", where)
        if gt.dim() == 4:
            gt = gt[:, 0]
        if all(_get(s, "pred_sem_seg") is not None for s in samples):  # what IoUMetric scores
            pred = _stack(samples, "pred_sem_seg", where)
            if pred.dim() == 4:
                pred = pred[:, 0]
            self.evaluator.update(pred.long(), gt, pred_is_labels=True, index=index)
        else:
            self.evaluator.update(_stack(samples, "seg_logits", where).float(), gt, index=index)


class _PredGtMaskMetric(_DenseMetric):
    task = ""

    def _shape_key(self) -> str:
        return f"gt_{self.task}"

    def _update(self, samples, index) -> None:
        where = type(self).__name__
        pred = _stack(samples, f"pred_{self.task}", where).float()
        gt = _stack(samples, f"gt_{self.task}", where).float()
        mask = _stack(samples, "mask", where)
        self.evaluator.update(pred, gt, mask, index=index)


@METRICS.register_module()
class NormalMetric(_PredGtMaskMetric):
    """Normal adapter (``NormalEvaluator`` kwargs)."""

    evaluator_cls = NormalEvaluator
    task = "normal"
    default_prefix = "normal"


@METRICS.register_module()
class PointmapMetric(_PredGtMaskMetric):
    """Pointmap adapter (``PointmapEvaluator`` kwargs)."""

    evaluator_cls = PointmapEvaluator
    task = "pointmap"
    default_prefix = "pointmap"


@METRICS.register_module()
class AlbedoMetric(_PredGtMaskMetric):
    """Albedo adapter (``AlbedoEvaluator`` kwargs)."""

    evaluator_cls = AlbedoEvaluator
    task = "albedo"
    default_prefix = "albedo"
