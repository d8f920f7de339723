"""mmengine ``BaseMetric`` adapter of :class:`PoseEvaluator`, registered as ``sapiens2.PoseMetric``.

Data samples follow mmpose's top-down ``PoseDataSample`` layout (dicts or data elements):
``pred_instances.keypoints`` (N x K x 2, image pixels), ``pred_instances.keypoint_scores`` (N x K),
optional ``pred_instances.bbox_scores`` / ``gt_instances.bbox_scores``, ``gt_instances.bbox_scales``
(N x 2; their product is the OKS-NMS area, as in mmpose), ``img_id``, ``category_id`` (default 1,
as mmpose's ``CocoMetric``) and ``sample_idx`` (dedup under DDP). The GT comes from ``ann_file``
(COCO JSON) or, without it, from each sample's ``raw_ann_info`` (COCO annotation dict: keypoints,
bbox, area, iscrowd, category_id).

Vocabulary: ``meta=`` when given; otherwise the ``dataset_meta`` mmengine's runner sets from the
dataset (mmpose's ``keypoint_id2name`` / ``sigmas`` / ``dataset_name``, or a vocabulary JSON dict):
a built-in set when ``dataset_name`` names one with the same keypoints, else the names and sigmas
given. A ``dataset_meta`` that disagrees with an explicit ``meta`` (count or names) is an error.

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
from evaluators.pose.metadata import KeypointMeta, load_meta, meta_from_dict
from evaluators.registry import METRICS
from sapiens2 import vocab


def meta_from_dataset_meta(dm: dict) -> KeypointMeta:
    """Keypoint metadata from an mmengine/mmpose ``dataset_meta`` (or a vocabulary JSON dict).

    Raises:
        ValueError: the dict holds neither keypoint names nor a known ``dataset_name``.
    """
    names = None
    if isinstance(dm.get("keypoint_id2name"), dict):
        id2 = dm["keypoint_id2name"]
        names = [id2[i] for i in sorted(id2, key=int)]
    elif isinstance(dm.get("keypoints"), list):
        names = [k["name"] if isinstance(k, dict) else str(k) for k in dm["keypoints"]]
    name = dm.get("dataset_name")
    try:
        builtin = load_meta(name) if name else None
    except ValueError:
        builtin = None
    if builtin is not None and (names is None or builtin.names == names):
        return builtin
    if names is None:
        raise ValueError(
            f"PoseMetric: dataset_meta has no keypoint names ('keypoint_id2name' or 'keypoints') and "
            f"dataset_name {name!r} is not a built-in keypoint set ({vocab.keypoint_sets()})"
        )
    sig = dm.get("sigmas")
    return meta_from_dict(
        {
            "dataset_name": name or "dataset_meta",
            "keypoints": names,
            "sigmas": None if sig is None else [float(v) for v in np.asarray(sig).reshape(-1)],
            "parts": dm.get("parts") or {},
            "whole_name": dm.get("whole_name") or "wholebody",
        },
        "dataset_meta",
    )


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
        self._ann_file = ann_file
        self._kwargs = dict(evaluator_kwargs)
        self._explicit_meta = evaluator_kwargs.get("meta") is not None
        self.evaluator = PoseEvaluator(gt=ann_file, **evaluator_kwargs)
        self.last_conventions: dict = {}

    @property
    def dataset_meta(self):
        """The dataset's meta; setting it sets the keypoint vocabulary unless ``meta`` was given."""
        return self._dataset_meta

    @dataset_meta.setter
    def dataset_meta(self, dataset_meta) -> None:
        self._dataset_meta = dataset_meta
        if not dataset_meta:
            return
        theirs = meta_from_dataset_meta(dict(dataset_meta))
        ours = self.evaluator.meta
        if self._explicit_meta:
            if theirs.num_keypoints != ours.num_keypoints or theirs.names != ours.names:
                raise ValueError(
                    f"PoseMetric: meta={ours.name!r} ({ours.num_keypoints} keypoints) disagrees with the "
                    f"dataset's dataset_meta {theirs.name!r} ({theirs.num_keypoints} keypoints"
                    f"{', other names' if theirs.num_keypoints == ours.num_keypoints else ''}); "
                    "drop meta= to use the dataset's vocabulary, or fix one of them"
                )
            return
        self.evaluator = PoseEvaluator(gt=self._ann_file, **{**self._kwargs, "meta": theirs})

    def process(self, data_batch, data_samples) -> None:
        """Add each sample's predicted instances (and GT from ``raw_ann_info`` when no ann_file)."""
        for n, s in enumerate(data_samples):
            kps = _field(s, "pred_instances", "keypoints")
            ks = _field(s, "pred_instances", "keypoint_scores")
            if kps is None or ks is None:
                raise KeyError(f"PoseMetric: data sample {n} lacks pred_instances.keypoints/keypoint_scores")
            kps, ks = np.asarray(kps, np.float64), np.asarray(ks, np.float64)
            k = self.evaluator.meta.num_keypoints
            if kps.ndim == 3 and kps.shape[1] != k and not self._explicit_meta and not self._dataset_meta:
                raise ValueError(
                    f"PoseMetric: data sample {n} has {kps.shape[1]} keypoints but the metric uses "
                    f"{self.evaluator.meta.name} ({k}): no meta= was given and no dataset_meta was set; "
                    f"pass meta=NAME (built in: {vocab.keypoint_sets()}) or a metadata JSON"
                )
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
                    # no area: 0.53 x box, as mmpose's BaseCocoStyleDataset and xtcocotools use_area=False
                    gt_areas=np.full(num, float(ann["area"]) if ann.get("area") is not None
                                     else ann["bbox"][2] * ann["bbox"][3] * 0.53),
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
