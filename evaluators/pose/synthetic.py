"""Generated COCO keypoint GT/results with the edge cases COCOeval must get right.

Used by the tests (comparison with xtcocotools) and ``benchmarks/speed/coco_ap_speed.py``; also a
reference run of stock xtcocotools on such data (:func:`xtcocotools_stats`).
"""

from __future__ import annotations

import contextlib
import copy
import io

import numpy as np

from evaluators.pose.coco_ap import STAT_NAMES
from sapiens2.vocab_match import builtin_sets_with_count


def make_keypoint_case(
    num_images: int,
    num_keypoints: int,
    seed: int = 0,
    max_people: int = 4,
    categories: tuple[int, ...] = (1,),
    edge_cases: bool = True,
) -> tuple[dict, list[dict]]:
    """A COCO keypoint GT dict and a results list.

    With ``edge_cases``: images without GT, images without results, crowd GT, GT without labelled
    keypoints, results with all-zero scores, duplicate GT and results (OKS and score ties), rounded
    scores (ties across images), more than 20 results in some images, small/medium/large areas, a
    second category when ``categories`` has two.

    Args:
        num_images: number of images.
        num_keypoints: K.
        seed: RNG seed.
        max_people: most GT people per image.
        categories: category ids to use.
        edge_cases: add the edge cases above.

    Returns:
        ``(gt, results)``.
    """
    rng = np.random.default_rng(seed)
    images = [{"id": int(i + 1), "width": 640, "height": 480} for i in range(num_images)]
    anns, results = [], []
    ann_id = 1
    for img in images:
        kind = rng.random() if edge_cases else 1.0
        n_people = 0 if kind < 0.05 else int(rng.integers(1, max_people + 1))
        people = []
        for _ in range(n_people):
            scale = float(np.exp(rng.uniform(np.log(20), np.log(300))))  # small to large people
            cx, cy = rng.uniform(0, 640), rng.uniform(0, 480)
            xy = np.stack(
                [cx + rng.normal(0, scale / 4, num_keypoints), cy + rng.normal(0, scale / 3, num_keypoints)],
                1,
            )
            vis = rng.choice([0, 1, 2], size=num_keypoints, p=[0.2, 0.2, 0.6])
            if edge_cases and rng.random() < 0.05:
                vis[:] = 0  # GT without labelled keypoints: ignored, still matchable
            xy[vis == 0] = 0.0
            x0, y0 = xy[vis > 0].min(0) if (vis > 0).any() else (cx - scale / 2, cy - scale / 2)
            x1, y1 = xy[vis > 0].max(0) if (vis > 0).any() else (cx + scale / 2, cy + scale / 2)
            bbox = [float(x0), float(y0), float(max(x1 - x0, 1.0)), float(max(y1 - y0, 1.0))]
            cat = int(rng.choice(categories))
            crowd = int(edge_cases and rng.random() < 0.05)
            kp = np.concatenate([xy, vis[:, None]], 1).reshape(-1)
            ann = {
                "id": ann_id,
                "image_id": img["id"],
                "category_id": cat,
                "iscrowd": crowd,
                "area": float(bbox[2] * bbox[3] * rng.uniform(0.4, 0.9)),
                "bbox": bbox,
                "num_keypoints": int((vis > 0).sum()),
                "keypoints": [float(v) for v in kp],
            }
            anns.append(ann)
            ann_id += 1
            people.append((xy, scale, cat))
            if edge_cases and rng.random() < 0.03:  # an exact duplicate GT: OKS ties
                anns.append({**copy.deepcopy(ann), "id": ann_id})
                ann_id += 1
        if edge_cases and kind < 0.1:
            continue  # image without results
        for xy, scale, cat in people:
            n_det = int(rng.integers(0, 3))
            for _ in range(n_det):
                noise = rng.normal(0, scale * rng.uniform(0.005, 0.2), xy.shape)
                pred = xy + noise
                kscore = rng.uniform(0, 1, num_keypoints)
                if edge_cases and rng.random() < 0.03:
                    kscore[:] = 0.0  # dropped by COCOeval
                score = float(rng.uniform(0, 1))
                if edge_cases and rng.random() < 0.3:
                    score = round(score, 1)  # ties within and across images
                res = {
                    "image_id": img["id"],
                    "category_id": cat,
                    "score": score,
                    "keypoints": [float(v) for v in np.concatenate([pred, kscore[:, None]], 1).reshape(-1)],
                }
                results.append(res)
                if edge_cases and rng.random() < 0.05:
                    results.append(copy.deepcopy(res))
        n_fp = int(rng.integers(0, 25 if edge_cases and rng.random() < 0.05 else 2))
        for _ in range(n_fp):  # false positives, sometimes more than maxDets
            pred = np.stack([rng.uniform(0, 640, num_keypoints), rng.uniform(0, 480, num_keypoints)], 1)
            results.append(
                {
                    "image_id": img["id"],
                    "category_id": int(rng.choice(categories)),
                    "score": float(round(rng.uniform(0, 1), 2)),
                    "keypoints": [
                        float(v)
                        for v in np.concatenate([pred, rng.uniform(0, 1, (num_keypoints, 1))], 1).reshape(-1)
                    ],
                }
            )
    order = rng.permutation(len(results))
    results = [results[i] for i in order]
    names = _names_for(num_keypoints)
    cats = [{"id": c, "name": f"person{c}", "keypoints": list(names)} for c in categories]
    return {"images": images, "annotations": anns, "categories": cats}, results


def restrict_to_keypoints(gt: dict, results: list[dict], ids) -> tuple[dict, list[dict]]:
    """Copies of ``gt`` and ``results`` with only keypoints ``ids``, ``num_keypoints`` recounted."""
    ids = list(ids)
    gt = copy.deepcopy(gt)
    for ann in gt["annotations"]:
        k = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3)[ids]
        ann["keypoints"] = k.reshape(-1).tolist()
        ann["num_keypoints"] = int((k[:, 2] > 0).sum())
    out = []
    for r in results:
        r = copy.deepcopy(r)
        r["keypoints"] = np.asarray(r["keypoints"], dtype=np.float64).reshape(-1, 3)[ids].reshape(-1).tolist()
        out.append(r)
    return gt, out


# COCO-WholeBody's split fields, in the order ``keypoints_wholebody`` concatenates them.
WHOLEBODY_FIELDS = {
    "body": "keypoints",
    "foot": "foot_kpts",
    "face": "face_kpts",
    "left_hand": "lefthand_kpts",
    "right_hand": "righthand_kpts",
}


def to_wholebody_fields(gt: dict, results: list[dict], parts: dict[str, list[int]]):
    """Copies in COCO-WholeBody's split-field layout (as the official evaluators write them).

    Each part's keypoints go to their own field (``keypoints`` holds only the body), so
    ``COCO.loadRes`` takes every detection's area from the box around its body keypoints.

    Args:
        gt: GT dict with all keypoints under ``keypoints``.
        results: results with all keypoints under ``keypoints``.
        parts: ids per part, with exactly the keys of :data:`WHOLEBODY_FIELDS`.

    Returns:
        ``(gt, results)`` in the split layout.
    """
    if set(parts) != set(WHOLEBODY_FIELDS):
        raise ValueError(f"parts must be {list(WHOLEBODY_FIELDS)}, got {list(parts)}")

    def split(obj):
        k = np.asarray(obj["keypoints"], dtype=np.float64).reshape(-1, 3)
        for part, name in WHOLEBODY_FIELDS.items():
            obj[name] = k[parts[part]].reshape(-1).tolist()
        return obj

    gt = copy.deepcopy(gt)
    for ann in gt["annotations"]:
        split(ann)
        ann["num_keypoints"] = int((np.asarray(ann["keypoints"]).reshape(-1, 3)[:, 2] > 0).sum())
    return gt, [split(copy.deepcopy(r)) for r in results]


def _names_for(num_keypoints: int) -> list[str]:
    """The names of the one built-in set of that count (so the file is read as it), else ``k0, k1, ...``."""
    sets = builtin_sets_with_count(num_keypoints)
    return list(sets[0].names) if len(sets) == 1 else [f"k{i}" for i in range(num_keypoints)]


def xtcocotools_stats(
    gt: dict, results: list[dict], sigmas, use_area: bool = True, iou_type: str = "keypoints"
) -> dict[str, float]:
    """The ten stats of stock xtcocotools ``COCOeval(iouType=iou_type)`` (quiet)."""
    from xtcocotools.coco import COCO
    from xtcocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(results)) if results else _empty_res(coco_gt)
        ev = COCOeval(coco_gt, coco_dt, iou_type, np.asarray(sigmas, dtype=np.float64), use_area=use_area)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return dict(zip(STAT_NAMES, (float(s) for s in ev.stats)))


def _empty_res(coco_gt):
    from xtcocotools.coco import COCO

    res = COCO()
    res.dataset = {
        "images": list(coco_gt.dataset["images"]),
        "annotations": [],
        "categories": coco_gt.dataset.get("categories", []),
    }
    res.createIndex()
    return res
