"""``PoseEvaluator``: COCO keypoint AP/AR per part, streaming, mergeable and distributed.

The state is the per-instance prediction (keypoints, keypoint scores, box score, area, image id)
and, when no COCO GT file is given, the instance's GT, keyed by dataset index: an index seen
twice (``DistributedSampler`` padding, or two merged evaluators) counts once, first holder wins.
``compute`` runs the official pipeline (instance score = box score x mean keypoint score above
0.2, OKS-NMS at 0.9 per image) and the COCO keypoint AP engine for the whole set and each part,
and, when every sample brought its GT, PCK@0.05, PCK@0.1 and EPE (:mod:`evaluators.pose.pck`).
``bootstrap_intervals`` resamples test images (image ids): AP exactly from the per-image matches
(:mod:`evaluators.pose.ap_bootstrap`), PCK/EPE from per-image sums.

Example:
    >>> ev = PoseEvaluator(meta="coco17")
    >>> ev.update(pred_xy, pred_scores, image_ids=[1, 1], index=[0, 1],
    ...           gt_keypoints=gt_xyv, gt_bboxes=gt_boxes, gt_areas=gt_areas)  # doctest: +SKIP
    >>> ev.compute()["AP"]  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from evaluators.base import Evaluator
from evaluators.bootstrap import resample_counts, resample_indices, resolve_metrics, weighted_sums
from evaluators.metric_decl import FieldValue, MetricDecl, count_decl
from evaluators.pose.ap_bootstrap import resampled_ap
from evaluators.pose.coco_ap import STAT_NAMES, evaluate_keypoints, evaluate_parts
from evaluators.pose.coco_io import load_coco_gt, load_coco_results, read_json_file
from evaluators.pose.crowd import CROWD_STAT_NAMES, crowd_index_of, evaluate_crowd
from evaluators.pose.instances import coco_gt_from_records, instance_records
from evaluators.pose.metadata import KeypointMeta, load_meta
from evaluators.pose.pck import (
    PCK_THRESHOLDS,
    keypoint_point_stats,
    pck_metrics_by_keypoint,
    resampled_pck,
)
from evaluators.pose.pckh import PCKH_GROUPS, PCKH_THRESHOLDS, pckh_of_instances
from evaluators.pose.pipeline import to_coco_results
from evaluators.registry import EVALUATORS
from sapiens2 import distributed as D


@EVALUATORS.register_module()
class PoseEvaluator(Evaluator):
    """COCO keypoint AP/AR (xtcocotools ``use_area=True`` semantics) for the whole set and its parts.

    Args:
        meta: keypoint metadata (built-in name, JSON path or dict); default ``keypoints308``.
        gt: optional COCO GT (path or dict) with image ids matching the ``image_ids`` passed to
            ``update``; without it the GT comes from ``update(gt_keypoints=...)``, one per sample.
        keypoint_score_thr: keypoint scores above this enter the instance score.
        nms_thr: OKS-NMS threshold (None: no NMS).
        use_area: OKS scale from the GT area (True) or from 0.53 x box area.
        max_dets: detections per image kept by COCOeval.
        detection_area: how a detection's area (for the area ranges) is taken: ``"body"`` (official
            whole-body convention: the box around its body keypoints, for every part) or ``"part"``.
    """

    task = "pose"
    # Whole-body stats carry their official bare names (``AP``); the leaderboard calls them
    # ``wholebody/<stat>``. ``{part.key}``: the keypoint parts of the metadata, ``{s.key}``: COCO stats.
    # PCK/EPE need each sample's GT (``update(gt_keypoints=...)``).
    metrics = (
        # The probe's pose headline (sapiens2/tasks/pose.py): the official AP is nearly binary at the
        # probe's 256x192 crops, EPE is linear in the keypoint error (docs/probing.md).
        MetricDecl("EPE", "EPE px", False, "px", bootstrapped=True, interval=True, headline_ok=True, note=(
                   "EPE px is the mean keypoint error in pixels of the 1024x768 top-down crop of the GT box "
                   "(whatever the input size: error x 1024 / crop height).")),
        MetricDecl("PCK@0.1", "PCK@0.1 %", True, "fraction", 100.0, bootstrapped=True, interval=True),
        MetricDecl("PCK@0.05", "PCK@0.05 %", True, "fraction", 100.0, bootstrapped=True, interval=True),
        MetricDecl("AP", "AP %", True, "fraction", 100.0, bootstrapped=True, interval=True, headline_ok=True,
                   summary=True, name="wholebody/AP", aliases=("mAP",), note=(
                       "AP % is COCO OKS AP over all 308 keypoints unless the protocol says otherwise (a "
                       "reference system's protocol can score a shared subset: never compare the two). "
                       "It counts a detection only at an object keypoint similarity of 0.5 or more (each "
                       "keypoint's error against a tolerance of a few percent of the person's size, tightest "
                       "on face and hands): predictions off by tens of pixels of the 1024x768 crop reach "
                       "none, so AP is 0 however far apart such rows are; compare them on EPE.")),
        MetricDecl("AR", "AR %", True, "fraction", 100.0, headline_ok=True, name="wholebody/AR",
                   aliases=("mAR",)),
        MetricDecl("AP .5", "AP50 %", True, "fraction", 100.0, name="wholebody/AP .5"),
        MetricDecl("AP .75", "AP75 %", True, "fraction", 100.0, name="wholebody/AP .75"),
        MetricDecl("{s.key}", "{s.label} %", True, "fraction", 100.0, shown=False, name="wholebody/{s.key}"),
        # shown: the parts the paper reports (its Table 8); the others (``extra``) stay in the records
        MetricDecl("{part.key}/{ar.key}", "{part.label} {ar.label} %", True, "fraction", 100.0,
                   bootstrapped="*/AP", interval="body/AP",
                   shown=("body/*", "foot/*", "face/*", "left_hand/*", "right_hand/*")),
        MetricDecl("{part.key}/{ps.key}", "{part.label} {ps.label} %", True, "fraction", 100.0, shown=False),
        MetricDecl("{part.key}/PCK@{pck.key}", "{part.label} PCK@{pck.label} %", True, "fraction", 100.0,
                   bootstrapped=True, shown=False),
        MetricDecl("{part.key}/EPE", "{part.label} EPE px", False, "px", bootstrapped=True, shown=False),
        # mmpose's PCKAccuracy averages per keypoint type (PCK@t above); the pooled rate beside it
        MetricDecl("PCK@{pck.key}_pooled", "PCK@{pck.label} pooled %", True, "fraction", 100.0,
                   bootstrapped=True, shown=False),
        MetricDecl("{part.key}/PCK@{pck.key}_pooled", "{part.label} PCK@{pck.label} pooled %", True,
                   "fraction", 100.0, bootstrapped=True, shown=False),
        # MPII's PCKh, only when every sample brought a GT head size (evaluators.pose.pckh)
        MetricDecl("PCKh@{pckh.key}", "PCKh@{pckh.label} %", True, "fraction", 100.0,
                   requires="has_head_sizes"),
        MetricDecl("PCKh/{pckh_group.key}", "PCKh {pckh_group.label} %", True, "fraction", 100.0,
                   shown=False, requires="has_head_sizes"),
        count_decl("pck_degenerate_boxes"),
        # CrowdPose's official statistics (xtcocotools keypoints_crowd, evaluators.pose.crowd), only for
        # crowdpose14 against a GT file whose images carry crowdIndex (a CrowdPose GT): easy / medium /
        # hard by crowd index stand where COCO's area ranges would mislead a CrowdPose reader
        MetricDecl("crowdpose/{crowd.key}", "CrowdPose {crowd.label} %", True, "fraction", 100.0,
                   shown=False, requires="is_crowdpose"),
    )

    def __init__(
        self,
        meta: str | Path | dict | KeypointMeta | None = None,
        gt: str | Path | dict | None = None,
        keypoint_score_thr: float = 0.2,
        nms_thr: float | None = 0.9,
        use_area: bool = True,
        max_dets: int = 20,
        detection_area: str = "body",
    ) -> None:
        self.meta = meta if isinstance(meta, KeypointMeta) else load_meta(meta)
        self.gt_source = gt
        self.keypoint_score_thr = keypoint_score_thr
        self.nms_thr = nms_thr
        self.use_area = use_area
        self.max_dets = max_dets
        self.detection_area = detection_area
        self.meta.detection_area_ids(detection_area)  # fail early on an unknown convention
        super().__init__()
        self.conventions = {
            "metric": "COCO keypoint OKS AP/AR, xtcocotools COCOeval(iouType='keypoints') semantics",
            "use_area": use_area,
            "max_dets": max_dets,
            "detection_area": detection_area,
            "area_ranges": {"all": [0, 1e10], "medium": [32**2, 96**2], "large": [96**2, 1e10]},
            "instance_score": f"bbox_score * mean(keypoint scores > {keypoint_score_thr})",
            "nms": f"OKS-NMS per image, threshold {nms_thr}, mean area of the pair" if nms_thr else "none",
            "nms_area": "areas given to update, else GT area, else GT box w*h, else keypoint extent",
            "keypoint_set": self.meta.name,
            "parts": {k: len(v) for k, v in self.meta.parts.items()},
            "dedup": "one prediction per dataset index (first holder wins)",
            "pck": "hit: a labelled (v > 0) GT keypoint with |pred - gt| < t * max(w, h) of the GT box; "
            "PCK@t: hit rate per keypoint type over the instances labelling it, then the mean over the "
            "types labelled at least once (mmpose PCKAccuracy); PCK@t_pooled: hits over all labelled "
            "(instance, keypoint) pairs; each prediction against the GT of its own sample, before "
            "OKS-NMS; only when every sample brought gt_keypoints",
            "epe": "mean |pred - gt| over labelled GT keypoints in pixels of the 1024x768 top-down crop of "
            "the GT box (box widened to 3:4 w:h, padded 1.25): error x 1024 / crop height",
            "pckh": "only with gt_head_sizes: |pred - gt| < t * head size (0.6 x head-box diagonal), per "
            "joint, then MPII's mean weighted by labelled counts without pelvis and thorax "
            "(mmpose MpiiPCKAccuracy)",
            "pck_degenerate_boxes": "GT boxes with max(w, h) == 0 are left out of PCK/EPE and counted",
            "bootstrap": "percentile bootstrap over image ids (sorted); AP exact per resample from the "
            "per-image matches; undefined AP (-1) resamples left out",
        }

    def metric_fields(self) -> dict[str, tuple[FieldValue, ...]]:
        """``part``: the keypoint parts (whole body aside); COCO stats: ``ar`` AP and AR, ``ps`` the
        others, ``s`` those not declared one by one; ``pck``: the PCK thresholds."""
        stat = {s: FieldValue(s, s) for s in STAT_NAMES}
        return {
            "part": tuple(FieldValue(p, p) for p in list(self.meta.groups())[1:]),
            "ar": (stat["AP"], stat["AR"]),
            "ps": tuple(v for s, v in stat.items() if s not in ("AP", "AR")),
            "s": tuple(v for s, v in stat.items() if s not in ("AP", "AR", "AP .5", "AP .75")),
            "pck": tuple(FieldValue(str(t), str(t)) for t in PCK_THRESHOLDS),
            "pckh": tuple(FieldValue(str(t), str(t)) for t in PCKH_THRESHOLDS),
            "pckh_group": tuple(FieldValue(g, g) for g in PCKH_GROUPS),
            "crowd": tuple(FieldValue(s, s) for s in CROWD_STAT_NAMES),
        }

    @property
    def is_crowdpose(self) -> bool:
        """CrowdPose-14 against a GT whose images all carry ``crowdIndex``: its official stats computed."""
        if self.meta.name != "crowdpose14" or self.gt_source is None:
            return False
        images = self.coco_gt().get("images") or []
        return bool(images) and all(isinstance(im, dict) and "crowdIndex" in im for im in images)

    @property
    def has_head_sizes(self) -> bool:
        """Every evaluated sample brought a GT head size (MPII): PCKh is computed."""
        insts = self._instances()
        return bool(insts) and all("head_size" in r.get("gt", {}) for r in insts)

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        super().reset()
        self._records: dict[int, dict] = {}
        self._unindexed: list[dict] = []

    def update(
        self,
        keypoints,
        keypoint_scores,
        image_ids,
        index=None,
        bbox_scores=None,
        areas=None,
        category_ids=None,
        affine=None,
        gt_keypoints=None,
        gt_bboxes=None,
        gt_areas=None,
        gt_iscrowd=None,
        gt_category_ids=None,
        gt_head_sizes=None,
    ) -> None:
        """Add a batch of B predicted instances.

        Args:
            keypoints: B x K x 2 predicted keypoints, in image pixels (or crop pixels with ``affine``).
            keypoint_scores: B x K scores.
            image_ids: B image ids (of the COCO GT when one is given).
            index: B dataset indices for dedup (None: never deduplicated).
            bbox_scores: B detector box scores (default 1, i.e. GT boxes).
            areas: B instance areas for OKS-NMS (default: see ``conventions['nms_area']``).
            category_ids: B category ids (default 1).
            affine: B x 2 x 3 crop-to-image affine transforms applied to ``keypoints``.
            gt_keypoints: B x K x 3 GT (x, y, visibility) in image pixels, when no GT file is used.
            gt_bboxes: B x 4 GT boxes (x, y, w, h).
            gt_areas: B GT areas (default: box w * h).
            gt_iscrowd: B crowd flags (default 0).
            gt_category_ids: B GT category ids (default: ``category_ids``).
            gt_head_sizes: B MPII head sizes (0.6 x head-box diagonal): adds PCKh (MPII's summary,
                :mod:`evaluators.pose.pckh`) when every sample brought one.
        """
        if self._synced:
            raise RuntimeError("PoseEvaluator: update() after sync(); call reset() first")
        records, idx = instance_records(
            self.meta.num_keypoints, keypoints, keypoint_scores, image_ids, index=index,
            bbox_scores=bbox_scores, areas=areas, category_ids=category_ids, affine=affine,
            gt_keypoints=gt_keypoints, gt_bboxes=gt_bboxes, gt_areas=gt_areas, gt_iscrowd=gt_iscrowd,
            gt_category_ids=gt_category_ids, gt_head_sizes=gt_head_sizes,
        )
        for j, rec in enumerate(records):
            if idx is None:
                self._unindexed.append(rec)
            elif idx[j] not in self._records:
                self._records[idx[j]] = rec
        self._state["num_samples"] = torch.tensor(len(self._records) + len(self._unindexed))

    def merge(self, other: PoseEvaluator) -> PoseEvaluator:
        """Fold ``other``'s instances in (an index already held here keeps this one's record)."""
        if not isinstance(other, PoseEvaluator):
            raise TypeError(f"cannot merge {type(other).__name__} into PoseEvaluator")
        if other.conventions != self.conventions:
            raise ValueError("PoseEvaluator.merge: evaluators use different conventions")
        for i, rec in other._records.items():
            self._records.setdefault(i, rec)
        self._unindexed.extend(other._unindexed)
        self._state["num_samples"] = torch.tensor(len(self._records) + len(self._unindexed))
        return self

    def sync(self) -> None:
        """Gather every rank's instances (rank order, first holder of an index wins)."""
        if self._synced or not D.is_distributed():
            return
        gathered: list = [None] * D.get_world_size()
        dist.all_gather_object(gathered, (self._records, self._unindexed))
        records: dict[int, dict] = {}
        unindexed: list[dict] = []
        for recs, extra in gathered:
            for i, rec in recs.items():
                records.setdefault(i, rec)
            unindexed.extend(extra)
        self._records, self._unindexed = records, unindexed
        self._state["num_samples"] = torch.tensor(len(records) + len(unindexed))
        self._synced = True

    def state(self) -> dict[str, torch.Tensor]:
        return {"num_samples": torch.tensor(len(self._records) + len(self._unindexed))}

    # ------------------------------------------------------------------ compute
    def _instances(self) -> list[dict]:
        return [self._records[i] for i in sorted(self._records)] + list(self._unindexed)

    def coco_gt(self) -> dict:
        """The COCO GT dict the evaluation uses (the given one, or one built from the samples)."""
        if self.gt_source is not None:
            if isinstance(self.gt_source, (str, Path)):
                return read_json_file(self.gt_source, "COCO keypoint ground truth")
            return self.gt_source
        return coco_gt_from_records(self._instances())

    def coco_results(self) -> list[dict]:
        """COCO keypoint results after instance scoring and OKS-NMS."""
        insts = self._instances()
        if not insts:
            return []
        return to_coco_results(
            [r["image_id"] for r in insts],
            np.stack([r["keypoints"] for r in insts]),
            np.stack([r["keypoint_scores"] for r in insts]),
            np.array([r["bbox_score"] for r in insts]),
            np.array([r["area"] for r in insts]),
            self.meta.sigmas,
            category_ids=[r["category_id"] for r in insts],
            keypoint_score_thr=self.keypoint_score_thr,
            nms_thr=self.nms_thr,
        )

    def compute_parts(self) -> dict[str, dict[str, float]]:
        """``{"wholebody": {ten stats}, "<part>": {...}, ...}``."""
        gt, k = load_coco_gt(self.coco_gt(), self.meta.num_keypoints, use_area=self.use_area)
        dets = load_coco_results(self.coco_results(), gt, k)
        return evaluate_parts(gt, dets, self.meta, self.max_dets, self.use_area, self.detection_area)

    def compute(self) -> dict[str, Any]:
        """Flat metrics: wholebody stats under their official names, parts as ``<part>/<stat>``."""
        parts = self.compute_parts()
        out: dict[str, Any] = dict(parts["wholebody"])
        for part, stats in parts.items():
            if part != "wholebody":
                out.update({f"{part}/{name}": stats[name] for name in STAT_NAMES})
        point = self._point_stats()
        if point is not None:
            out.update(pck_metrics_by_keypoint(point[0].sum(0), self.meta.groups()))
            out["pck_degenerate_boxes"] = float(point[1])
            out.update(pckh_of_instances(self._instances(), self.meta.names))
        if self.is_crowdpose:
            data = self.coco_gt()
            gt, k = load_coco_gt(data, self.meta.num_keypoints, use_area=self.use_area)
            dets = load_coco_results(self.coco_results(), gt, k)
            crowd = evaluate_crowd(gt, dets, self.meta.sigmas, crowd_index_of(data, gt, "GT"), self.use_area)
            out.update({f"crowdpose/{name}": value for name, value in crowd.items()})
        out["num_samples"] = float(len(self._records) + len(self._unindexed))
        out["conventions"] = dict(self.conventions)
        return out

    # ------------------------------------------------------------------ PCK / EPE and bootstrap
    def _point_stats(self) -> tuple[np.ndarray, int, list] | None:
        """(per-instance ``N x K x S`` PCK/EPE statistics, degenerate boxes, image ids); None without GT."""
        insts = self._instances()
        if not insts or any("gt" not in r for r in insts):
            return None
        gt_xyv = np.stack([r["gt"]["keypoints"] for r in insts])
        boxes = np.stack([r["gt"]["bbox"] for r in insts])
        pred = np.stack([r["keypoints"] for r in insts])
        stats = keypoint_point_stats(pred, gt_xyv, boxes)
        degenerate = int((np.maximum(boxes[:, 2], boxes[:, 3]) <= 0).sum())
        return stats, degenerate, [r["image_id"] for r in insts]

    @property
    def num_images(self) -> int:
        """n: the number of test images (distinct image ids of the evaluated GT) the bootstrap resamples."""
        if self.gt_source is None:
            return len({r["image_id"] for r in self._instances()})
        return len(self.coco_gt().get("images", []))

    def bootstrap_image_ids(self) -> np.ndarray:
        """The image ids the bootstrap resamples: the COCO GT's ``image_ids`` (ascending)."""
        gt, _ = load_coco_gt(self.coco_gt(), self.meta.num_keypoints, use_area=self.use_area)
        return np.asarray(gt.image_ids)

    def bootstrap_distribution(
        self, metrics: list[str] | None = None, *, resamples: int = 1000, seed: int = 0
    ) -> dict[str, np.ndarray]:
        """AP (whole body or ``<part>/AP``), PCK and EPE on each resample of the test images.

        Images are resampled in ascending image-id order (the COCO GT's ``image_ids``); AP is
        recomputed exactly from the per-image matches (undefined AP, -1, becomes NaN).
        """
        owner = "PoseEvaluator"
        keys = resolve_metrics(metrics, self.default_bootstrap_metrics(), self.bootstrap_keys, owner)
        gt, k = load_coco_gt(self.coco_gt(), self.meta.num_keypoints, use_area=self.use_area)
        n = len(gt.image_ids)
        idx = resample_indices(n, resamples, seed)
        groups = self.meta.groups()
        out: dict[str, np.ndarray] = {}
        ap_keys = [key for key in keys if key == "AP" or key.endswith("/AP")]
        if ap_keys:
            dets = load_coco_results(self.coco_results(), gt, k)
            area_ids = self.meta.detection_area_ids(self.detection_area)
            for key in ap_keys:
                ids = groups["wholebody" if key == "AP" else key[: -len("/AP")]]
                res = evaluate_keypoints(
                    gt,
                    dets,
                    self.meta.sigmas,
                    ids,
                    self.max_dets,
                    self.use_area,
                    area_keypoint_ids=area_ids,
                    keep_matches=True,
                )
                ap = resampled_ap(res.matches, idx)
                out[key] = np.where(ap < 0, np.nan, ap)
        other = [key for key in keys if key not in out]
        if other:
            point = self._point_stats()
            if point is None:
                raise KeyError(f"PoseEvaluator.bootstrap_intervals: {other} need gt_keypoints in update()")
            stats, _, image_ids = point
            pos = {iid: i for i, iid in enumerate(gt.image_ids)}
            per_image = np.zeros((n, *stats.shape[1:]))
            np.add.at(per_image, np.array([pos[i] for i in image_ids], dtype=np.int64), stats)
            sums = weighted_sums(resample_counts(idx, n), per_image)
            out.update(resampled_pck(sums, groups, other))
        return {key: out[key] for key in keys}
