"""Per-person breakdown of MediaPipe's results on a synthetic split (for the realism measurement).

Each function takes the split, the top-down crop size and MediaPipe's per-person results (one
``PoseResult`` or None per pose annotation, in annotation order, as
:class:`benchmarks.systems.mediapipe_system.RecordingSystem` records them) and scores the COCO-17
body points: PCK@0.1, persons by what makes them hard, per-point errors, detections that matched
another person, and which seg classes occur.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from benchmarks.systems import mediapipe_system as M
from evaluators.pose import PoseEvaluator
from evaluators.pose.oks import oks_pairs
from sapiens2.datasets import open_split
from sapiens2.reference import seg_classes29

COCO17 = 17  # the first 17 entries of the shared keypoints are the COCO body points
FEW_LABELLED = 5  # a person with at most this many COCO-17 points labelled is cut by the border
FEW_VISIBLE = 3  # ... with at most this many visible is mostly hidden
PCK_THRESHOLD = 0.1


def pck_of_crops(split: Path, results: list, crop_hw: tuple[int, int]) -> dict:
    """PCK@0.1 of the COCO-17 visible GT points from the recorded per-person results.

    A point is a hit when its distance to the GT is below 0.1 x max(w, h) of the GT box; a person
    MediaPipe missed counts each of its visible points as a miss (``pck``) and is left out of
    ``pck_detected``.
    """

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    if len(results) != len(ds.anns):
        raise RuntimeError(f"{split}: {len(results)} MediaPipe results for {len(ds.anns)} persons")
    vids = M.vocabulary_ids()[:COCO17]
    hits = counted = hits_detected = counted_detected = 0
    for i, res in enumerate(results):
        ann = ds.anns[i]
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids]
        visible = gt[:, 2] == 2
        counted += int(visible.sum())
        if res is None:
            continue
        img_xy = image_points(ds, i, res)
        side = max(float(ann["bbox"][2]), float(ann["bbox"][3]))
        hit = (np.linalg.norm(img_xy - gt[:, :2], axis=1) < PCK_THRESHOLD * side) & visible
        hits += int(hit.sum())
        hits_detected += int(hit.sum())
        counted_detected += int(visible.sum())
    return {"pck": hits / counted if counted else float("nan"),
            "pck_detected": hits_detected / counted_detected if counted_detected else float("nan"),
            "visible_points": counted}


def person_groups(split: Path, crop_hw: tuple[int, int]) -> dict[str, list[int]]:
    """Persons (pose annotation indices) by what makes them hard, for the breakdown of misses.

    ``cut``: at most :data:`FEW_LABELLED` of the 17 COCO body points labelled (cut by the image
    border); ``lying``: the person box wider than tall (and not cut); ``hidden``: at most
    :data:`FEW_VISIBLE` of its labelled points visible (occluded, and neither cut nor lying);
    ``clear``: the rest.
    """

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    vids = M.vocabulary_ids()[:COCO17]
    groups: dict[str, list[int]] = {"cut": [], "lying": [], "hidden": [], "clear": []}
    for i, ann in enumerate(ds.anns):
        v = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids][:, 2]
        if (v > 0).sum() <= FEW_LABELLED:
            groups["cut"].append(i)
        elif ann["bbox"][2] > ann["bbox"][3]:
            groups["lying"].append(i)
        elif (v == 2).sum() <= FEW_VISIBLE:
            groups["hidden"].append(i)
        else:
            groups["clear"].append(i)
    return groups


def subset_body_ap(split: Path, crop_hw: tuple[int, int], results: list, keep: list[int]) -> float:
    """Body AP over the persons ``keep`` only (their GT and their own top-down predictions)."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    keep_ids = {ds.anns[i]["id"] for i in keep}
    images = {ds.anns[i]["image_id"] for i in keep}
    gt = M.shared_gt(ds.coco, [a for a in ds.anns if a["id"] in keep_ids], images)
    ev = PoseEvaluator(meta=M.shared_meta(), gt=gt)
    fed = 0
    for i in keep:
        if results[i] is None:
            continue
        s = ds[i]
        kps, scores = results[i].shared()
        ev.update(kps[None], scores[None], [s["image_id"]], index=[i], bbox_scores=[s["bbox_score"]],
                  areas=[s["area"]], affine=s["crop"]["inv_affine"][None])
        fed += 1
    return float(ev.compute()["body/AP"]) if fed else 0.0


def breakdown(split: Path, crop_hw: tuple[int, int], results: list) -> dict:
    """Per group of :func:`person_groups`: persons, persons missed, and the group's body AP."""
    out = {}
    for name, members in person_groups(split, crop_hw).items():
        ap = round(subset_body_ap(split, crop_hw, results, members), 4) if members else None
        missed = sum(results[i] is None for i in members)
        out[name] = {"people": len(members), "missed": missed, "body_AP": ap}
    return out


def keypoint_errors(split: Path, crop_hw: tuple[int, int], results: list) -> dict[str, dict]:
    """Per COCO-17 point: median distance to the GT over sqrt(GT area) (the OKS scale) of the detected
    persons' labelled points, the point's OKS sigma, and the OKS of a point that far off."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    meta = M.shared_meta()
    vids = M.vocabulary_ids()[:COCO17]
    errors: list[list[float]] = [[] for _ in range(COCO17)]
    for i, res in enumerate(results):
        ann = ds.anns[i]
        if res is None or not ann.get("area"):
            continue
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids]
        xy = image_points(ds, i, res)
        d = np.linalg.norm(xy - gt[:, :2], axis=1) / np.sqrt(float(ann["area"]))
        for k in np.nonzero(gt[:, 2] > 0)[0]:
            errors[k].append(float(d[k]))
    out = {}
    for k in range(COCO17):
        sigma = float(meta["sigmas"][k])
        med = float(np.median(errors[k])) if errors[k] else None
        oks = None if med is None else round(float(np.exp(-med**2 / (2 * (2 * sigma) ** 2))), 3)
        out[meta["keypoints"][k]] = {"points": len(errors[k]), "sigma": sigma, "oks_at_median": oks,
                                     "median_error": None if med is None else round(med, 4)}
    return out


def wrong_person_share(split: Path, crop_hw: tuple[int, int], results: list) -> dict:
    """How many detected persons MediaPipe read off another person in their crop.

    A detection counts as the wrong person when its COCO-17 OKS (the evaluator's
    :func:`~evaluators.pose.oks.oks_pairs`) against another GT person of the same image is higher
    than against its own GT person (a top-down single-person model given a crop that holds two
    people picks one of them).
    """
    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    sigmas = np.asarray(M.shared_meta()["sigmas"][:COCO17], float)
    vids = M.vocabulary_ids()[:COCO17]
    by_image: dict = {}
    for ann in ds.anns:
        by_image.setdefault(ann["image_id"], []).append(ann)
    detected = wrong = 0
    for i, res in enumerate(results):
        if res is None:
            continue
        ann = ds.anns[i]
        others = [o for o in by_image[ann["image_id"]] if o["id"] != ann["id"]]
        detected += 1
        if not others:
            continue
        people = [ann, *others]
        gt = np.stack([np.asarray(p["keypoints"], float).reshape(-1, 3)[vids] for p in people])
        xy = image_points(ds, i, res)[None]
        oks = oks_pairs(np.zeros(len(people), int), np.arange(len(people)), xy[..., 0], xy[..., 1],
                        gt[..., 0], gt[..., 1], gt[..., 2] > 0,
                        np.array([float(p["area"]) for p in people]),
                        np.array([p["bbox"] for p in people], float), sigmas)
        wrong += bool(oks[1:].max() > oks[0])
    return {"detected": detected, "wrong_person": wrong}


def image_points(ds, index: int, result) -> np.ndarray:
    """The COCO-17 points of MediaPipe's ``result`` on crop ``index`` of ``ds``, in image pixels."""
    inv = np.asarray(ds[index]["crop"]["inv_affine"], float)
    return result.shared()[0][:COCO17] @ inv[:, :2].T + inv[:, 2]


def class_census(split: Path) -> dict[str, int]:
    """In how many images of ``split`` each seg class (by name) has at least one pixel."""
    names = [c["name"] for c in seg_classes29()["classes"]]
    counts = dict.fromkeys(names, 0)
    for png in sorted((split / "seg").glob("*.png")):
        for cid in np.unique(np.asarray(Image.open(png))):
            if cid < len(names):
                counts[names[cid]] += 1
    return counts
