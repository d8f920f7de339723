"""The instance records of :class:`evaluators.pose.evaluator.PoseEvaluator`: a batch of predicted
instances (and their GT, when no COCO GT file is used) checked and split into one record per instance,
and the COCO GT dict built back from such records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def as_array(x: Any, dtype=np.float64) -> np.ndarray | None:
    """``x`` (tensor, array or sequence) as a NumPy array of ``dtype``; None stays None."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def instance_records(
    num_keypoints: int,
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
) -> tuple[list[dict], list[int] | None]:
    """One record per instance of a batch of B, after checking every input's shape.

    The arguments are those of :meth:`evaluators.pose.evaluator.PoseEvaluator.update` (which
    documents them), with ``num_keypoints`` the keypoint set's K.

    Returns:
        (records, dataset indices): B dicts (``image_id``, ``category_id``, ``keypoints`` in image
        pixels, ``keypoint_scores``, ``bbox_score``, ``area`` and, with GT, ``gt``), and the B
        indices (None when ``index`` is None).

    Raises:
        ValueError: an input of the wrong shape or length, NaN/Inf keypoints or scores, or GT parts
            given without the ones they need.
    """
    kps = as_array(keypoints)
    k = num_keypoints
    if kps is None or kps.ndim != 3 or kps.shape[1:] != (k, 2):
        raise ValueError(
            f"keypoints: expected B x {k} x 2, got shape {None if kps is None else kps.shape}"
        )
    b = kps.shape[0]
    ks = as_array(keypoint_scores)
    if ks.shape != (b, k):
        raise ValueError(f"keypoint_scores: expected {(b, k)}, got {ks.shape}")
    for name, arr in (("keypoints", kps), ("keypoint_scores", ks)):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name}: {int((~np.isfinite(arr)).sum())} NaN/Inf values in this batch")
    if affine is not None:
        aff = as_array(affine).reshape(b, 2, 3)
        kps = np.einsum("bij,bkj->bki", aff[:, :, :2], kps) + aff[:, None, :, 2]
    ids = image_ids.tolist() if isinstance(image_ids, (torch.Tensor, np.ndarray)) else list(image_ids)
    if len(ids) != b:
        raise ValueError(f"image_ids: expected {b} ids, got {len(ids)}")
    bs = np.ones(b) if bbox_scores is None else as_array(bbox_scores).reshape(b)
    cats = [1] * b if category_ids is None else [int(c) for c in as_array(category_ids, np.int64).reshape(-1)]
    if len(cats) != b:
        raise ValueError(f"category_ids: expected {b} ids, got {len(cats)}")
    gcats = (
        cats if gt_category_ids is None else [int(c) for c in as_array(gt_category_ids, np.int64).reshape(-1)]
    )
    if len(gcats) != b:
        raise ValueError(f"gt_category_ids: expected {b} ids, got {len(gcats)}")
    gk = as_array(gt_keypoints)
    if gk is not None and gk.shape != (b, k, 3):
        raise ValueError(f"gt_keypoints: expected {(b, k, 3)}, got {gk.shape}")
    gb = None if gt_bboxes is None else as_array(gt_bboxes).reshape(b, 4)
    if gk is not None and gb is None:
        raise ValueError("gt_bboxes are needed with gt_keypoints")
    ga = None if gt_areas is None else as_array(gt_areas).reshape(b)
    if ga is None and gb is not None:
        ga = gb[:, 2] * gb[:, 3]
    ar = None if areas is None else as_array(areas).reshape(b)
    if ar is None:
        ext = np.ptp(kps[..., 0], axis=1) * np.ptp(kps[..., 1], axis=1)
        ar = ga if ga is not None else ext
    crowd = np.zeros(b, bool) if gt_iscrowd is None else as_array(gt_iscrowd, bool).reshape(b)
    heads = None if gt_head_sizes is None else as_array(gt_head_sizes).reshape(b)
    if heads is not None and gk is None:
        raise ValueError("gt_head_sizes need gt_keypoints")
    idx = (
        None
        if index is None
        else [int(i) for i in (index.tolist() if hasattr(index, "tolist") else index)]
    )
    if idx is not None and len(idx) != b:
        raise ValueError(f"index: expected {b} dataset indices, got {len(idx)}")
    out = []
    for j in range(b):
        rec = {
            "image_id": ids[j],
            "category_id": cats[j],
            "keypoints": kps[j],
            "keypoint_scores": ks[j],
            "bbox_score": float(bs[j]),
            "area": float(ar[j]),
        }
        if gk is not None:
            rec["gt"] = {
                "keypoints": gk[j],
                "bbox": gb[j],
                "area": float(ga[j]),
                "iscrowd": bool(crowd[j]),
                "category_id": gcats[j],
            }
            if heads is not None:
                rec["gt"]["head_size"] = float(heads[j])
        out.append(rec)
    return out, idx


def coco_gt_from_records(insts: list[dict]) -> dict:
    """The COCO keypoint GT dict of instance records that carry their GT (``instance_records``)."""
    missing = sum("gt" not in r for r in insts)
    if missing:
        raise ValueError(
            f"PoseEvaluator: {missing} samples lack gt_keypoints and no COCO GT file was given"
        )
    images = sorted({r["image_id"] for r in insts}, key=lambda v: (str(type(v)), v))
    anns = []
    for n, r in enumerate(insts):
        g = r["gt"]
        anns.append(
            {
                "id": n + 1,
                "image_id": r["image_id"],
                "category_id": g.get("category_id", r["category_id"]),
                "keypoints": g["keypoints"].reshape(-1).tolist(),
                "bbox": g["bbox"].tolist(),
                "area": g["area"],
                "iscrowd": int(g["iscrowd"]),
                "num_keypoints": int((g["keypoints"][:, 2] > 0).sum()),
            }
        )
    cats = sorted({r["category_id"] for r in insts} | {a["category_id"] for a in anns})
    return {
        "images": [{"id": i} for i in images],
        "annotations": anns,
        "categories": [{"id": c, "name": "person"} for c in cats],
    }
