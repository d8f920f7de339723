"""CrowdPose's official keypoint evaluation: xtcocotools ``COCOeval(iouType='keypoints_crowd')``.

CrowdPose is scored with COCO's OKS matching and 101-point AP, with three differences from the
``keypoints`` evaluation (:mod:`evaluators.pose.coco_ap`):

* a GT is ignored when it is crowd or its ``num_keypoints`` field is 0 (CrowdPose counts only its
  visible joints there), not when it labels no keypoint;
* the official summary is six overall statistics (AP, AP .5, AP .75, AR, AR .5, AR .75; 20
  detections per image, no area ranges) and the AP of three image groups by the image's
  ``crowdIndex``: easy (< 0.2), medium (< 0.8), hard (the rest);
* a group's AP is the plain mean of its precision array over IoU thresholds, recall thresholds and
  categories, undefined entries (-1) included, as xtcocotools' ``get_type_result`` takes it (which
  also rounds it to 4 decimals for printing; the value here is not rounded). A group without images
  or without a non-ignored GT is -1.

The OKS scale and the GT area are CrowdPose's official ``use_area=False`` convention (``0.53 x`` box
area; the file has no ``area``) unless the caller passes ``use_area=True``.
"""

from __future__ import annotations

import numpy as np

from evaluators.pose.coco_ap import KeypointDetections, KeypointGroundTruth, evaluate_keypoints

CROWD_STAT_NAMES = ("AP", "AP .5", "AP .75", "AR", "AR .5", "AR .75", "AP easy", "AP medium", "AP hard")
# crowd-index thresholds of the official split (xtcocotools summarize(): get_type_result(0.2, 0.8))
CROWD_INDEX_BOUNDS = (0.2, 0.8)
CROWD_GROUPS = ("easy", "medium", "hard")


def crowd_index_of(data: dict, gt: KeypointGroundTruth, src: str) -> np.ndarray:
    """Each evaluated image's ``crowdIndex`` (in ``gt.image_ids`` order) from the GT dict's images.

    Raises:
        ValueError: an image without a finite numeric ``crowdIndex`` (naming the file and image).
    """
    by_id = {}
    for im in data.get("images", []):
        if isinstance(im, dict) and "id" in im:
            by_id[im["id"]] = im.get("crowdIndex")
    out = np.empty(len(gt.image_ids))
    for i, iid in enumerate(gt.image_ids):
        v = by_id.get(iid)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise ValueError(
                f"{src}: image id {iid!r} has no numeric 'crowdIndex' ({v!r}); CrowdPose's official "
                "easy / medium / hard AP groups images by it (a CrowdPose GT file holds one per image)"
            )
        out[i] = float(v)
    return out


def crowd_groups(crowd_index: np.ndarray) -> dict[str, np.ndarray]:
    """Positions (in ``gt.image_ids``) of the easy, medium and hard images."""
    lo, hi = CROWD_INDEX_BOUNDS
    return {
        "easy": np.nonzero(crowd_index < lo)[0],
        "medium": np.nonzero((crowd_index >= lo) & (crowd_index < hi))[0],
        "hard": np.nonzero(crowd_index >= hi)[0],
    }


def _ignore_counts(gt: KeypointGroundTruth, src: str) -> np.ndarray:
    counts = gt.num_keypoints
    if counts is None or np.isnan(counts).any():
        j = 0 if counts is None else int(np.nonzero(np.isnan(counts))[0][0])
        raise ValueError(
            f"{src}: annotation {j} (of the evaluated images) has no numeric 'num_keypoints'; CrowdPose's "
            "official evaluation (keypoints_crowd) ignores a person by it (a CrowdPose GT file holds one)"
        )
    return counts


def _images_subset(gt: KeypointGroundTruth, dets: KeypointDetections, positions: np.ndarray):
    """GT and detections of the images at ``positions`` only (the image list itself is kept)."""
    g = np.isin(gt.image_index, positions)
    d = np.isin(dets.image_index, positions)
    sub_gt = KeypointGroundTruth(
        gt.image_ids, gt.category_ids, gt.image_index[g], gt.category[g], gt.keypoints[g], gt.area[g],
        gt.bbox[g], gt.iscrowd[g], None if gt.num_keypoints is None else gt.num_keypoints[g],
    )
    sub_dets = KeypointDetections(
        dets.image_index[d], dets.category[d], dets.keypoints[d], dets.score[d],
        None if dets.area is None else dets.area[d],
    )
    return sub_gt, sub_dets


def evaluate_crowd(
    gt: KeypointGroundTruth,
    dets: KeypointDetections,
    sigmas: np.ndarray,
    crowd_index: np.ndarray,
    use_area: bool = False,
    src: str = "<CrowdPose GT>",
) -> dict[str, float]:
    """CrowdPose's nine official statistics (``CROWD_STAT_NAMES``; see the module docstring).

    Args:
        gt: ground truth arrays with ``num_keypoints``.
        dets: detections.
        sigmas: the 14 CrowdPose OKS sigmas.
        crowd_index: per image of ``gt.image_ids``, its ``crowdIndex`` (:func:`crowd_index_of`).
        use_area: OKS scale from the GT ``area`` (True) or ``0.53 x`` box area (False, official).
        src: the GT's name for messages.
    """
    counts = _ignore_counts(gt, src)
    res = evaluate_keypoints(gt, dets, sigmas, max_dets=20, use_area=use_area, ignore_counts=counts)
    out = {name: res.stats[name] for name in ("AP", "AP .5", "AP .75", "AR", "AR .5", "AR .75")}
    for group, positions in crowd_groups(crowd_index).items():
        if positions.size == 0:
            out[f"AP {group}"] = -1.0
            continue
        sub_gt, sub_dets = _images_subset(gt, dets, positions)
        sub = evaluate_keypoints(
            sub_gt, sub_dets, sigmas, max_dets=20, use_area=use_area, ignore_counts=sub_gt.num_keypoints
        )
        out[f"AP {group}"] = float(np.mean(sub.precision[:, :, :, 0]))
    return out
