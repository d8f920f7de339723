"""MediaPipe 0.10.21 as an off-the-shelf reference system (pose landmarks, person masks).

``mediapipe`` 0.10.21 is the last release whose wheel ships its legacy "solutions" models:
BlazePose GHUM full (``modules/pose_landmark/pose_landmark_full.tflite``, 33 landmarks and a
person segmentation mask, with the ``modules/pose_detection`` person detector) and the selfie
segmenter (``modules/selfie_segmentation``). Only ``model_complexity=1`` is used: the lite and
heavy landmark models are not in the wheel and MediaPipe would try to download them. Nothing is
downloaded at run time.

What MediaPipe shares with our vocabularies is evaluated with our evaluators:

- pose: the landmarks in :data:`LANDMARK_MAP` (27 of 33, mapped by name onto ``keypoints308``)
  that the split's keypoint set has (all 27 on ``keypoints308``, the 17 body points on COCO-17;
  :mod:`benchmarks.systems.mediapipe_keypoints`), scored with ``PoseEvaluator`` on that subset
  (the set's names, sigmas and flip pairs), top-down on the ground-truth person boxes like the
  official Sapiens2 protocol;
- segmentation: person vs background (GT: label > 0), ``SegEvaluator`` with 2 classes, for the
  pose landmarker's mask (one person per image) and the selfie segmenter.

The mapping, the landmarks left out and why are in ``docs/reference_systems.md``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.systems.mediapipe_keypoints import (
    KEYPOINTS308,
    KEYPOINTS308_PROTOCOL_ID,
    LANDMARK_MAP,
    shared_subset,
)
from benchmarks.systems.mediapipe_keypoints import LEFT_OUT as LEFT_OUT  # re-exported (records, docs)
from evaluators.pose import PoseEvaluator
from evaluators.runner import Update, dense_update, run_evaluation
from evaluators.seg import SegEvaluator
from sapiens2.datasets import open_split

MEDIAPIPE_VERSION = "0.10.21"
INSTALL_HINT = (
    f"mediapipe {MEDIAPIPE_VERSION} is not installed; run `bash scripts/install_mediapipe.sh` "
    "(installs the wheel without the declared deps that cannot be installed beside the rest, "
    "see scripts/requirements-mediapipe.txt)"
)
# The protocol of keypoints308 splits (other keypoint sets: SharedSubset.protocol_id).
POSE_PROTOCOL_ID = KEYPOINTS308_PROTOCOL_ID
SEG_PROTOCOL_ID = "person-vs-background-v1"
POSE_MODEL_NAME = f"mediapipe-pose-landmarker-full ({MEDIAPIPE_VERSION})"
SELFIE_MODEL_NAME = f"mediapipe-selfie-segmentation ({MEDIAPIPE_VERSION})"
# Model files of the wheel each system uses (relative to the mediapipe package folder's parent).
POSE_MODEL_FILES = (
    "mediapipe/modules/pose_detection/pose_detection.tflite",
    "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
)
SELFIE_MODEL_FILES = ("mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",)

def shared_meta(keypoints=KEYPOINTS308) -> dict:
    """Keypoint metadata of the shared subset on keypoint set ``keypoints`` for ``PoseEvaluator``.

    The subset keeps the order of :data:`LANDMARK_MAP`; names, sigmas and flip pairs are the set's
    (:meth:`~benchmarks.systems.mediapipe_keypoints.SharedSubset.meta`).
    """
    return shared_subset(keypoints).meta()


def vocabulary_ids(keypoints=KEYPOINTS308) -> list[int]:
    """Ids of the shared subset in keypoint set ``keypoints``, in subset order."""
    return list(shared_subset(keypoints).set_ids)


def require_mediapipe():
    """Import mediapipe and check that the wheel's models are there.

    Returns:
        The ``mediapipe`` module.

    Raises:
        RuntimeError: not installed (with the install line), or its model files are missing.
    """
    try:
        import mediapipe as mp
    except ImportError as e:
        raise RuntimeError(f"{INSTALL_HINT} (import failed: {e})") from e
    missing = [p for p in POSE_MODEL_FILES + SELFIE_MODEL_FILES if not model_path(mp, p).is_file()]
    if missing:
        raise RuntimeError(
            f"mediapipe {installed_version()} lacks the model files {missing} (releases after "
            f"{MEDIAPIPE_VERSION} ship no models); {INSTALL_HINT}"
        )
    return mp


def installed_version() -> str | None:
    """The installed mediapipe distribution version, or None."""
    try:
        return importlib.metadata.version("mediapipe")
    except importlib.metadata.PackageNotFoundError:
        return None


def model_path(mp_module, rel: str) -> Path:
    """Absolute path of a wheel-relative model file (``mediapipe/modules/...``)."""
    return Path(mp_module.__file__).resolve().parent.parent / rel


def model_files_info(mp_module, rels: tuple[str, ...]) -> list[dict]:
    """``[{"path": wheel-relative path, "sha256": ..., "bytes": ...}]`` of the given model files."""
    out = []
    for rel in rels:
        p = model_path(mp_module, rel)
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        out.append({"path": rel, "sha256": digest, "bytes": p.stat().st_size})
    return out


def to_uint8_rgb(image) -> np.ndarray:
    """H x W x 3 uint8 RGB (contiguous) from a 3 x H x W float tensor/array in [0, 1] or uint8 HWC."""
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    if arr.ndim == 3 and arr.shape[0] == 3 and arr.shape[-1] != 3:
        arr = arr.transpose(1, 2, 0)
    if arr.ndim != 3 or arr.shape[-1] != 3:
        raise ValueError(f"image: expected 3 x H x W or H x W x 3 RGB, got shape {arr.shape}")
    if arr.dtype != np.uint8:
        arr = (np.clip(arr.astype(np.float32), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return np.ascontiguousarray(arr)


@dataclass
class PoseResult:
    """One MediaPipe pose on an image.

    Attributes:
        landmarks: 33 x 2 landmark positions in pixels (pixel centres at integer coordinates).
        visibility: 33 MediaPipe visibility scores in [0, 1].
        mask: H x W person probability, or None when segmentation is off.
    """

    landmarks: np.ndarray
    visibility: np.ndarray
    mask: np.ndarray | None

    def shared(self, landmark_ids: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(K x 2 keypoints, K scores) of the landmarks ``landmark_ids`` (default: all of
        :data:`LANDMARK_MAP`, in its order; a split's subset: ``SharedSubset.landmark_ids``)."""
        idx = [m for m, _, _, _ in LANDMARK_MAP] if landmark_ids is None else list(landmark_ids)
        return self.landmarks[idx], self.visibility[idx]


class MediaPipeSystem:
    """MediaPipe pose landmarker (full) and selfie segmenter on single images, CPU.

    Args:
        min_detection_confidence: person detector threshold of the pose solution.
        enable_segmentation: also return the pose landmarker's person mask.
        selfie_model: selfie segmenter model (0 general 256 x 256, 1 landscape 144 x 256).

    Use as a context manager (closes the MediaPipe graphs).
    """

    def __init__(self, min_detection_confidence: float = 0.5, enable_segmentation: bool = True,
                 selfie_model: int = 0) -> None:
        self.mp = require_mediapipe()
        self._pose = self.mp.solutions.pose.Pose(
            static_image_mode=True, model_complexity=1, enable_segmentation=enable_segmentation,
            min_detection_confidence=min_detection_confidence,
        )
        self._selfie = None
        self.selfie_model = selfie_model
        self.config = {"mediapipe_version": installed_version(), "api": "mediapipe.solutions (legacy)",
                       "model_complexity": 1, "static_image_mode": True,
                       "min_detection_confidence": min_detection_confidence, "selfie_model": selfie_model}

    def pose(self, image) -> PoseResult | None:
        """Run the pose landmarker on one RGB image; None when no person is detected."""
        img = to_uint8_rgb(image)
        res = self._pose.process(img)
        if res.pose_landmarks is None:
            return None
        h, w = img.shape[:2]
        lms = res.pose_landmarks.landmark
        # MediaPipe normalises by the image extent [0, W]; our pixel centres sit at integers.
        xy = np.array([[lm.x * w - 0.5, lm.y * h - 0.5] for lm in lms], dtype=np.float64)
        vis = np.array([lm.visibility for lm in lms], dtype=np.float64)
        mask = None if res.segmentation_mask is None else np.asarray(res.segmentation_mask, np.float32)
        return PoseResult(xy, vis, mask)

    def selfie_mask(self, image) -> np.ndarray:
        """Person probability H x W of the selfie segmenter."""
        if self._selfie is None:
            self._selfie = self.mp.solutions.selfie_segmentation.SelfieSegmentation(
                model_selection=self.selfie_model
            )
        return np.asarray(self._selfie.process(to_uint8_rgb(image)).segmentation_mask, np.float32)

    def close(self) -> None:
        for g in (self._pose, self._selfie):
            if g is not None:
                g.close()
        self._pose = self._selfie = None

    def __enter__(self) -> MediaPipeSystem:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordingSystem:
    """A pose system (:class:`MediaPipeSystem` or a stand-in) that keeps each pose result, in call
    order: :func:`evaluate_pose` calls it once per person, so ``results[i]`` is annotation ``i``'s."""

    def __init__(self, system) -> None:
        self.system = system
        self.results: list[PoseResult | None] = []

    def pose(self, image) -> PoseResult | None:
        res = self.system.pose(image)
        self.results.append(res)
        return res


def first_image_ids(coco: dict, n: int | None) -> set:
    """Ids of the first ``n`` images of a COCO dict (all when n is None)."""
    ids = [im["id"] for im in coco["images"]]
    return set(ids if n is None else ids[:n])


def shared_gt(coco: dict, anns: list[dict], keep_images: set, set_ids: list[int] | None = None) -> dict:
    """COCO GT restricted to the shared keypoints and to ``keep_images``.

    Args:
        coco: the split's COCO dict (its ``images``).
        anns: its annotations (keypoints in the split's keypoint set).
        keep_images: the image ids to keep.
        set_ids: the shared keypoints' ids in the split's set (default: keypoints308's, for a 308 split).
    """
    vids = vocabulary_ids() if set_ids is None else list(set_ids)
    out = []
    for ann in anns:
        if ann["image_id"] not in keep_images:
            continue
        kps = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3)[vids]
        x, y, w, h = (float(v) for v in ann["bbox"])
        out.append({"id": ann["id"], "image_id": ann["image_id"], "category_id": 1, "bbox": [x, y, w, h],
                    "area": float(ann.get("area", w * h)), "iscrowd": int(ann.get("iscrowd", 0)),
                    "keypoints": kps.reshape(-1).tolist(), "num_keypoints": int((kps[:, 2] > 0).sum())})
    images = [im for im in coco["images"] if im["id"] in keep_images]
    return {"images": images, "annotations": out, "categories": [{"id": 1, "name": "person"}]}


def evaluate_pose(split_dir, system: MediaPipeSystem, n: int | None = None,
                  input_size: tuple[int, int] = (192, 256), progress: bool = True) -> tuple[dict, dict]:
    """Top-down pose on the GT person boxes, scored on the shared keypoints.

    Each GT person is cropped like the Sapiens2 top-down pipeline (UDP affine, padding 1.25, at
    ``input_size`` (w, h)); MediaPipe runs on the crop; a crop where it detects nobody gives no
    prediction (a miss for that person).

    The keypoints scored are those of :data:`LANDMARK_MAP` that the split's keypoint set has, with
    that set's sigmas (:func:`~benchmarks.systems.mediapipe_keypoints.shared_subset`).

    Returns:
        (``PoseEvaluator.compute()`` output, info with counts, seconds, ``subset`` (the
        :class:`~benchmarks.systems.mediapipe_keypoints.SharedSubset` scored) and ``evaluator``
        (the filled ``PoseEvaluator``, e.g. for its bootstrap intervals)).

    Raises:
        NoSharedKeypoints: the split's keypoint set has none of MediaPipe's landmarks.
    """
    ds = open_split(split_dir, "pose", input_size=tuple(input_size))
    subset = shared_subset(ds.keypoint_set, where=str(split_dir))
    keep = first_image_ids(ds.coco, n)
    gt = shared_gt(ds.coco, ds.anns, keep, subset.set_ids)
    ev = PoseEvaluator(meta=subset.meta(), gt=gt)
    todo = [i for i, ann in enumerate(ds.anns) if ann["image_id"] in keep]
    if not todo:
        raise ValueError(f"{split_dir}: no person with a labelled keypoint in the images evaluated")

    def crop_update(i: int) -> Update | None:
        s = ds[i]
        res = system.pose(s["image"])
        if res is None:
            return None  # a missed person
        kps, scores = res.shared(subset.landmark_ids)
        return Update((kps[None], scores[None]), dict(
            image_ids=[s["image_id"]], index=[i], bbox_scores=[s["bbox_score"]], areas=[s["area"]],
            affine=s["crop"]["inv_affine"][None]))

    def produce():
        fed = 0
        for up in map(crop_update, todo):
            fed += up is not None
            yield up  # None: a missed person, skipped by the runner
        if not fed:  # raised before the evaluator computes anything
            raise RuntimeError(f"{split_dir}: MediaPipe detected no person in any of the {len(todo)} crops")

    result = run_evaluation(ev, produce(), progress=progress, desc="mediapipe pose", total=len(todo))
    missed = len(todo) - result.updates
    info = {"num_instances": len(todo), "num_images": len(gt["images"]), "missed_instances": missed,
            "seconds": result.seconds, "subset": subset, "evaluator": ev}
    return result.metrics, info


def person_labels(label) -> np.ndarray:
    """Person vs background GT: label > 0 -> 1, 0 -> 0, 255 (ignore) stays 255."""
    lab = label.numpy() if hasattr(label, "numpy") else np.asarray(label)
    return np.where(lab == 255, 255, (lab > 0).astype(np.int64))


def evaluate_masks(split_dir, system: MediaPipeSystem, n: int | None = None,
                   progress: bool = True) -> tuple[dict[str, dict], dict]:
    """Person vs background IoU of the pose landmarker's mask and the selfie segmenter's mask.

    A mask is thresholded at 0.5; an image where the pose landmarker detects nobody is predicted
    all background.

    Returns:
        ({"pose": SegEvaluator output, "selfie": SegEvaluator output}, info).
    """
    import torch

    ds = open_split(split_dir, "seg")
    count = len(ds) if n is None else min(n, len(ds))
    if count == 0:
        raise ValueError(f"{split_dir}: the seg manifest has no records")
    evs = {k: SegEvaluator(num_classes=2, class_names=["background", "person"]) for k in ("pose", "selfie")}
    no_person = 0

    def produce():
        nonlocal no_person
        for i in range(count):
            s = ds[i]
            gt = torch.from_numpy(person_labels(s["label"]))[None]
            res = system.pose(s["image"])
            if res is None or res.mask is None:
                no_person += 1
                pose_mask = np.zeros(gt.shape[1:], np.float32)
            else:
                pose_mask = res.mask
            for key, prob in (("pose", pose_mask), ("selfie", system.selfie_mask(s["image"]))):
                if prob.shape != tuple(gt.shape[1:]):
                    raise ValueError(
                        f"{s['image_path']}: {key} mask {prob.shape} does not match GT {tuple(gt.shape[1:])}"
                    )
                pred = torch.from_numpy((prob > 0.5).astype(np.int64))[None]
                up = dense_update("seg", pred, gt, index=[i], pred_is_labels=True)
                up.to = key
                yield up

    result = run_evaluation(evs, produce(), progress=progress, desc="mediapipe masks", total=2 * count)
    info = {"num_images": count, "pose_no_person": no_person, "seconds": result.seconds}
    return result.metrics, info
