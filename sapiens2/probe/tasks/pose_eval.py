"""Pose scoring of the probe: per-crop keypoints gathered (deduplicated by dataset index, reduced
across ranks) and scored by the project's COCO keypoint AP engine (``evaluators.pose.coco_ap``).

Until a ``PoseEvaluator`` with a crop-level ``update`` exists, this thin adapter holds the state;
it exposes the evaluator interface the probe uses (``update_crops``, ``sync``, ``compute``).
"""

from __future__ import annotations

import numpy as np
import torch

PARTS = ("body", "foot", "face", "left_hand", "right_hand")


class CropPoseEvaluator:
    """COCO keypoint AP/AR of top-down crop predictions (one crop = one image = one instance)."""

    def __init__(self):
        self.rows: dict[int, np.ndarray] = {}
        self.conventions = {
            "engine": "evaluators.pose.coco_ap (xtcocotools COCOeval semantics, use_area=True)",
            "coordinates": "crop pixels; GT area = bbox of visible GT keypoints in the crop",
            "instance_score": "mean keypoint score (one instance per crop, GT boxes)",
            "decoding": "UDP (sapiens2.codecs.udp.udp_decode)",
            "sigmas": "keypoints308.json",
        }

    def update_crops(self, pred_kpts, pred_scores, gt_kpts, gt_vis, gt_area, index) -> None:
        """Add a batch: B x K x 2 predictions and scores, B x K x 2 GT, B x K visibility, B areas."""
        pred_kpts, pred_scores, gt_kpts, gt_vis, gt_area = (
            torch.as_tensor(t).detach().cpu() for t in (pred_kpts, pred_scores, gt_kpts, gt_vis, gt_area)
        )
        for i, idx in enumerate(torch.as_tensor(index).tolist()):
            if idx in self.rows:
                continue
            row = np.concatenate(
                [
                    np.asarray(pred_kpts[i], np.float64).reshape(-1),
                    np.asarray(pred_scores[i], np.float64),
                    np.asarray(gt_kpts[i], np.float64).reshape(-1),
                    np.asarray(gt_vis[i], np.float64),
                    [float(gt_area[i])],
                ]
            )
            self.rows[idx] = row

    def sync(self) -> None:
        """Gather every rank's rows (duplicate indices counted once)."""
        from evaluators.distributed import all_gather_varlen, is_distributed

        if not is_distributed() or not self.rows:
            return
        idx = torch.tensor(sorted(self.rows), dtype=torch.int64)
        rows = torch.from_numpy(np.stack([self.rows[i] for i in idx.tolist()]))
        for gi, gr in zip(all_gather_varlen(idx), all_gather_varlen(rows)):
            for i, r in zip(gi.tolist(), gr.numpy()):
                self.rows.setdefault(i, r)

    def compute(self) -> dict:
        from evaluators.pose.coco_ap import KeypointDetections, KeypointGroundTruth, evaluate_keypoints
        from sapiens2.reference import keypoints308

        if not self.rows:
            raise ValueError("pose probe evaluator: no sample was evaluated")
        meta = keypoints308()
        k = int(meta["num_keypoints"])
        ids = sorted(self.rows)
        m = np.stack([self.rows[i] for i in ids])
        pk = m[:, : 2 * k].reshape(-1, k, 2)
        ps = m[:, 2 * k : 3 * k]
        gk = m[:, 3 * k : 5 * k].reshape(-1, k, 2)
        gv = m[:, 5 * k : 6 * k]
        area = m[:, 6 * k]
        n = len(ids)
        lo, hi = gk.min(1), gk.max(1)
        gt = KeypointGroundTruth(
            image_ids=list(range(n)),
            category_ids=[1],
            image_index=np.arange(n),
            category=np.ones(n, int),
            keypoints=np.concatenate([gk, (gv > 0)[..., None] * 2.0], -1),
            area=area,
            bbox=np.concatenate([lo, hi - lo], 1),
            iscrowd=np.zeros(n, bool),
        )
        dets = KeypointDetections(
            image_index=np.arange(n),
            category=np.ones(n, int),
            keypoints=np.concatenate([pk, ps[..., None]], -1),
            score=ps.mean(1),
        )
        sigmas = np.asarray(meta["sigmas"], np.float64)
        out = {}
        whole = evaluate_keypoints(gt, dets, sigmas).stats
        out.update({f"wholebody/{s}": v for s, v in whole.items()})
        out["mAP"], out["mAR"] = whole["AP"], whole["AR"]
        for part in PARTS:
            st = evaluate_keypoints(gt, dets, sigmas, keypoint_ids=meta["parts"][part]).stats
            out[f"{part}/AP"], out[f"{part}/AR"] = st["AP"], st["AR"]
        out["num_samples"] = float(n)
        out["conventions"] = dict(self.conventions)
        return out


def make_pose_evaluator():
    """The crop-level pose evaluator used by the probe."""
    return CropPoseEvaluator()
