"""Scoring ``predict``'s pose outputs against the people of a COCO keypoint file, in the file's vocabulary.

``sapiens2-bench predict IMAGE... --task pose --score-against FILE [--vocabulary NAME]`` predicts every
person of each image on its annotated box (GT boxes, box score 1, as ``reproduce``) and scores them here:
the model's keypoints (the 308 set) are mapped to the file's keypoint set by the declared map
(:func:`sapiens2.vocab_mapping.keypoint_mapping`: by name, hand roots and knuckles by rule; a target
keypoint without a 308 counterpart, e.g. COCO-WholeBody's 68 face points, gets no prediction: coordinates
0, score 0, never a hit), and :class:`evaluators.pose.PoseEvaluator` scores them with that set's OKS
sigmas and parts (AP/AR per part, PCK, EPE), over the predicted images only.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from evaluators.pose.evaluator import PoseEvaluator
from evaluators.pose.metadata import load_meta
from sapiens2.datasets.coco_people import AnnotatedPeople
from sapiens2.vocab import keypoint_set
from sapiens2.vocab_mapping import keypoint_mapping, map_keypoints

UNMAPPED_POLICY = "no prediction: coordinates 0, score 0, never a hit (counted as misses)"


def score_pose(people: AnnotatedPeople, predictions, source="keypoints308") -> dict:
    """Score per-image pose predictions against the people of an annotation file.

    Args:
        people: :func:`sapiens2.datasets.coco_people.read_people` of the file.
        predictions: ``(image path, N x Ks x 3 array)`` pairs (x, y, score in image pixels), one row per
            person of that image in the file's order (what ``predict_files(boxes_of=...)`` writes).
        source: the predictions' keypoint set (Sapiens2's ``keypoints308``).

    Returns:
        ``{"vocabulary", "keypoint_map", "ground_truth", "parts", "evaluator_metrics", "conventions"}``
        (``evaluator_metrics``: ``PoseEvaluator.compute``'s flat metrics; ``parts``: AP/AR per part).

    Raises:
        ValueError: no keypoint of the file's set has a counterpart, or a prediction's shape is not its
            image's people x source keypoints x 3.
    """
    src, target = keypoint_set(source), people.keypoint_set
    mapping = keypoint_mapping(src, target)
    if not mapping.mapped.any():
        raise ValueError(f"no keypoint of {target.name} has a counterpart in {src.name}: nothing to score")
    evaluator = PoseEvaluator(meta=target)
    seen, n = [], 0
    for path, array in predictions:
        im = people.image(path)
        arr = np.asarray(array, dtype=np.float64)
        want = (len(im.people), src.num_keypoints, 3)
        if arr.shape != want:
            raise ValueError(f"{path}: predictions are {arr.shape}, expected {want} (people of "
                             f"{people.source} x {src.name} keypoints x (x, y, score))")
        xy, scores = map_keypoints(arr[..., :2], arr[..., 2], mapping)
        k = len(im.people)
        evaluator.update(xy, scores, [im.image_id] * k, index=list(range(n, n + k)),
                         gt_keypoints=np.stack([p.keypoints for p in im.people]),
                         gt_bboxes=np.array([p.bbox_xywh for p in im.people]),
                         gt_areas=[p.area for p in im.people])
        seen.append({"image": str(path), "image_id": im.image_id, "people": [p.ann_id for p in im.people]})
        n += k
    if not n:
        raise ValueError(f"no prediction to score against {people.source}")
    metrics = evaluator.compute()
    conventions = metrics.pop("conventions")
    meta = load_meta(target)
    parts = {meta.whole_name: {s: metrics[s] for s in ("AP", "AR", "AP .5", "AP .75")}}
    for part in meta.parts:
        parts[part] = {s: metrics[f"{part}/{s}"] for s in ("AP", "AR", "AP .5", "AP .75")}
    unmapped = mapping.unmapped_names(target)
    return {
        "vocabulary": {"keypoint_set": target.name, "num_keypoints": target.num_keypoints,
                       "sigmas": f"{target.name}'s OKS sigmas ({target.source or 'declared'})",
                       "parts": {p: len(ids) for p, ids in target.parts.items()}},
        "keypoint_map": {"source": src.name, "target": target.name, "mapped": int(mapping.mapped.sum()),
                         "rules": dict(Counter(r for r in mapping.rules if r != "unmapped")),
                         "unmapped": unmapped, "unmapped_policy": UNMAPPED_POLICY},
        "ground_truth": {"file": str(Path(people.source)), "images": seen, "people": n,
                         "keypoint_set_from": people.keypoint_set_from, "area": people.area_source},
        "parts": parts,
        "evaluator_metrics": metrics,
        "conventions": {**conventions, "gt_area": people.area_source},
    }


def summary_lines(score: dict) -> list[str]:
    """What the terminal shows of a :func:`score_pose` result: vocabulary, map, one row per part."""
    v, m, gt = score["vocabulary"], score["keypoint_map"], score["ground_truth"]
    lines = [
        f"score: {len(gt['images'])} image(s), {gt['people']} person(s) of {gt['file']} in "
        f"{v['keypoint_set']} ({v['num_keypoints']} keypoints, its OKS sigmas and parts)",
        f"keypoints mapped {m['source']} -> {m['target']} (declared map): {m['mapped']} of "
        f"{v['num_keypoints']}",
        f"keypoint set {v['keypoint_set']}: {gt.get('keypoint_set_from', '')}; "
        f"person area: {gt.get('area', '')}",
    ]
    if m["unmapped"]:
        names = ", ".join(m["unmapped"][:3])
        lines.append(f"  {len(m['unmapped'])} without a counterpart ({names}, ...): {m['unmapped_policy']}")
    width = max(len(p) for p in score["parts"]) + 2
    lines.append(f"{'part':<{width}}" + "".join(f"{s:>9}" for s in ("AP", "AR", "AP .5", "AP .75")))
    for part, row in score["parts"].items():
        lines.append(f"{part:<{width}}" + "".join(f"{row[s]:>9.4f}" for s in ("AP", "AR", "AP .5", "AP .75")))
    ms = score["evaluator_metrics"]
    lines.append(f"PCK@0.1 {ms['PCK@0.1']:.4f}, EPE {ms['EPE']:.2f} px (1024x768 crop pixels; "
                 "unmapped keypoints included)")
    return lines
