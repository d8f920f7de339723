"""mmengine ``BaseMetric`` adapter of :class:`PoseEvaluator`, registered as ``sapiens2.PoseMetric``.

Data samples follow mmpose's top-down ``PoseDataSample`` layout (dicts or data elements):
``pred_instances.keypoints`` (N x K x 2, image pixels), ``pred_instances.keypoint_scores`` (N x K),
optional ``pred_instances.bbox_scores`` / ``gt_instances.bbox_scores``, ``gt_instances.bbox_scales``
(N x 2; their product is the OKS-NMS area, as in mmpose), ``img_id``, ``category_id`` (default 1,
as mmpose's ``CocoMetric``) and ``sample_idx`` (dedup under DDP). The GT comes from ``ann_file``
(COCO JSON) or, without it, from each sample's ``raw_ann_info`` (COCO annotation dict: keypoints,
bbox, area, iscrowd, category_id).

Example:
    >>> from mmengine.evaluator import Evaluator as MMEvaluator
    >>> cfg = dict(type="sapiens2.PoseMetric", ann_file="person_keypoints_val.json")
    >>> ev = MMEvaluator(cfg)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import torch
from mmengine.evaluator import BaseMetric

from evaluators.pose.evaluator import PoseEvaluator
from evaluators.registry import METRICS


def _field(obj, *path):
    for key in path:
        if obj is None:
            return None
        if hasattr(obj, "to_dict") and not isinstance(obj, dict):
            obj = obj.to_dict()
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy()
    return obj


@METRICS.register_module()
class PoseMetric(BaseMetric):
    """COCO keypoint AP/AR per part via :class:`PoseEvaluator` (its kwargs are accepted).

    Args:
        ann_file: COCO GT JSON (optional; see the module docstring).
        collect_device: unused (the evaluator gathers its own state).
        prefix: metric name prefix (default ``pose``).
        **evaluator_kwargs: ``meta``, ``keypoint_score_thr``, ``nms_thr``, ``use_area``, ``max_dets``.
    """

    default_prefix = "pose"

    def __init__(
        self,
        ann_file: str | None = None,
        collect_device: str = "cpu",
        prefix: str | None = None,
        **evaluator_kwargs,
    ) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.evaluator = PoseEvaluator(gt=ann_file, **evaluator_kwargs)
        self.last_conventions: dict = {}

    def process(self, data_batch, data_samples) -> None:
        """Add each sample's predicted instances (and GT from ``raw_ann_info`` when no ann_file)."""
        for n, s in enumerate(data_samples):
            kps = _field(s, "pred_instances", "keypoints")
            ks = _field(s, "pred_instances", "keypoint_scores")
            if kps is None or ks is None:
                raise KeyError(f"PoseMetric: data sample {n} lacks pred_instances.keypoints/keypoint_scores")
            kps, ks = np.asarray(kps, np.float64), np.asarray(ks, np.float64)
            num = kps.shape[0]
            bs = _field(s, "pred_instances", "bbox_scores")
            if bs is None:
                bs = _field(s, "gt_instances", "bbox_scores")
            bs = np.ones(num) if bs is None or len(bs) != num else np.asarray(bs, np.float64)
            scales = _field(s, "gt_instances", "bbox_scales")
            areas = np.prod(np.asarray(scales, np.float64), axis=1) if scales is not None else None
            idx = _field(s, "sample_idx")
            cat = _field(s, "category_id")
            cat = 1 if cat is None else int(np.asarray(cat).reshape(-1)[0])
            kwargs = {}
            if self.evaluator.gt_source is None:
                ann = _field(s, "raw_ann_info")
                ann = ann[0] if isinstance(ann, list) else ann
                if not isinstance(ann, dict):
                    raise KeyError(
                        f"PoseMetric: data sample {n} has no raw_ann_info and no ann_file was given"
                    )
                kwargs = dict(
                    gt_keypoints=np.asarray(ann["keypoints"], np.float64).reshape(1, -1, 3).repeat(num, 0),
                    gt_bboxes=np.tile(np.asarray(ann["bbox"], np.float64), (num, 1)),
                    gt_areas=np.full(num, float(ann.get("area", ann["bbox"][2] * ann["bbox"][3]))),
                    gt_iscrowd=np.full(num, bool(ann.get("iscrowd", 0))),
                    gt_category_ids=np.full(num, int(ann.get("category_id", cat))),
                )
            index = None if idx is None or num != 1 else [int(idx)]
            self.evaluator.update(
                kps,
                ks,
                [_field(s, "img_id")] * num,
                index=index,
                bbox_scores=bs,
                areas=areas,
                category_ids=np.full(num, cat),
                **kwargs,
            )

    def evaluate(self, size: int) -> dict:
        """Sync across ranks, compute, reset; returns the float metrics under ``<prefix>/<name>``."""
        self.evaluator.sync()
        res = self.evaluator.compute()
        self.evaluator.reset()
        self.last_conventions = res.pop("conventions", {})
        metrics = {k: float(v) for k, v in res.items()}
        return {f"{self.prefix}/{k}": v for k, v in metrics.items()} if self.prefix else metrics

    def compute_metrics(self, results: list) -> dict:
        """Unused: :meth:`evaluate` computes from the evaluator directly."""
        return self.evaluator.compute()
