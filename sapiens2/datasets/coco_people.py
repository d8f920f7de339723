"""The annotated people of a COCO keypoint file (for ``predict --boxes-from / --score-against``).

Reads any layout the COCO-style importers read (:mod:`sapiens2.datasets.importers`): flat ``keypoints`` of
one keypoint set, or COCO-WholeBody's distributed layout (``keypoints`` + ``foot_kpts``, ``face_kpts``,
``lefthand_kpts``, ``righthand_kpts``), read as its 133 keypoints, never as 17. The keypoint set is the
one named (``vocabulary``), else the file's ``keypoint_set`` (what ``data import`` writes), else the
built-in set whose names the file's ``categories[].keypoints`` lists
(:func:`sapiens2.vocab_match.keypoint_set_of_file`: never chosen by the count when sets share it); a count
that disagrees with the named set is an error.

A person's area (the OKS scale) is the file's ``area`` when every annotation has one, ``0.53 x`` its
box area when none has (xtcocotools ``use_area=False``, mmpose's convention for CrowdPose, AI
Challenger, PoseTrack18); a file where only some have one is an error. ``area_source`` says which.

The people of an image are its annotations that are not crowd regions and label at least one keypoint,
in file order: the pose reader's rule (:class:`sapiens2.datasets.pose.PoseTopdownDataset`,
``skip_empty``). An image is found by the last component of its ``file_name``; unlike ``data import``,
the file's other images need not exist (one photo of a 5000-image file can be predicted).

Example:
    >>> import json, pathlib, tempfile
    >>> ann = {"keypoint_set": "coco17", "images": [{"id": 1, "file_name": "val/photo.jpg"}], "annotations": [
    ...     {"id": 7, "image_id": 1, "bbox": [10, 20, 30, 40], "keypoints": [15, 25, 2] * 17},
    ...     {"id": 8, "image_id": 1, "bbox": [0, 0, 5, 5], "keypoints": [0, 0, 0] * 17}]}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "ann.json"
    >>> _ = path.write_text(json.dumps(ann))
    >>> people = read_people(path)
    >>> people.keypoint_set.name, [p.bbox_xyxy for p in people.image("photo.jpg").people]
    ('coco17', [(10.0, 20.0, 40.0, 60.0)])
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sapiens2.utils_io import read_json
from sapiens2.vocab import WHOLEBODY_SPLIT_SIZES, KeypointSet, VocabError, keypoint_set
from sapiens2.vocab_match import keypoint_set_of_file

from .importers import _flat_keypoints, check_category_keypoints
from .io import DatasetError

_LISTS = ("images", "annotations")
AREA_FROM_FILE = "the file's 'area'"
AREA_FROM_BOX = "0.53 x box w x h (the file has no 'area'; xtcocotools use_area=False, mmpose)"


@dataclass(frozen=True)
class Person:
    """One annotated person: annotation id, box (x, y, w, h), K x 3 keypoints (x, y, v), area."""

    ann_id: object
    bbox_xywh: tuple[float, float, float, float]
    keypoints: np.ndarray
    area: float

    @property
    def bbox_xyxy(self) -> tuple[float, float, float, float]:
        x, y, w, h = self.bbox_xywh
        return (x, y, x + w, y + h)


@dataclass(frozen=True)
class AnnotatedImage:
    """One image of the file: its id, file name, (H, W) when the file says, and its people."""

    image_id: object
    file_name: str
    size_hw: tuple[int, int] | None
    people: tuple[Person, ...]


@dataclass(frozen=True)
class AnnotatedPeople:
    """The people of every image of a COCO keypoint file, in one keypoint set.

    ``keypoint_set_from`` says how the set was chosen, ``area_source`` where the people's areas come from.
    """

    source: Path
    keypoint_set: KeypointSet
    images: dict[str, list[AnnotatedImage]]
    keypoint_set_from: str = ""
    area_source: str = AREA_FROM_FILE

    def image(self, path: str | os.PathLike) -> AnnotatedImage:
        """The file's image named like ``path`` (its last component).

        Raises:
            DatasetError: no image of that name, two of them, or an image without a person to score.
        """
        name = Path(path).name
        found = self.images.get(name, [])
        if not found:
            some = ", ".join(sorted(self.images)[:3])
            raise DatasetError(
                f"{self.source}: no image named {name!r} in 'images' ({len(self.images)} names, e.g. "
                f"{some}); images are matched by file name"
            )
        if len(found) > 1:
            raise DatasetError(
                f"{self.source}: {len(found)} images are named {name!r} (ids "
                f"{[im.image_id for im in found]}); cannot tell which one {path} is"
            )
        if not found[0].people:
            raise DatasetError(
                f"{self.source}: image {name!r} (id {found[0].image_id}) has no person with a labelled "
                "keypoint (crowd regions and unlabelled people are not predicted)"
            )
        return found[0]


def _file_keypoint_set(data: dict, src: Path, vocabulary) -> tuple[KeypointSet, str]:
    anns = data["annotations"]
    split = any(isinstance(a, dict) and any(f in a for f in WHOLEBODY_SPLIT_SIZES if f != "keypoints")
                for a in anns)
    first = next((a for a in anns if isinstance(a, dict) and isinstance(a.get("keypoints"), list)), None)
    count = 133 if split else (len(first["keypoints"]) // 3 if first is not None else None)
    how = "named by --vocabulary"
    try:
        if vocabulary is None and data.get("keypoint_set") is not None:
            vocabulary, how = data["keypoint_set"], "named by the file's keypoint_set"
        if vocabulary is None:
            cats = [c for c in data.get("categories") or [] if isinstance(c, dict)]
            listed = [c["keypoints"] for c in cats if isinstance(c.get("keypoints"), list)]
            names = next((n for n in listed if n), None)
            if split and names is not None and len(names) == 17:
                names = None  # COCO-WholeBody lists its 17 body points; its layout says 133
            return keypoint_set_of_file(names, count, str(src))
        ks = keypoint_set(vocabulary)
    except VocabError as e:
        raise DatasetError(str(e)) from None
    if count is not None and ks.num_keypoints != count:
        layout = "COCO-WholeBody's distributed layout: " if split else ""
        raise DatasetError(
            f"{src}: {layout}{count} keypoints per annotation, but the vocabulary {ks.name} has "
            f"{ks.num_keypoints}"
        )
    return ks, how


def _uses_file_area(anns: list, src: Path) -> bool:
    """True when every annotation has an ``area``, False when none has; an error when only some have."""
    missing = [i for i, a in enumerate(anns) if isinstance(a, dict) and a.get("area") is None]
    if not missing or len(missing) == len(anns):
        return not missing
    raise DatasetError(
        f"{src}: annotations[{missing[0]}] has no 'area' while others have one: the OKS scale would mix "
        "the file's areas with 0.53 x box areas; give every annotation an 'area' or none"
    )


def read_people(path: str | os.PathLike, vocabulary=None) -> AnnotatedPeople:
    """Read the people of a COCO keypoint file (see the module docstring).

    Args:
        path: the COCO keypoint JSON (any COCO-style layout, COCO-WholeBody's distributed one included).
        vocabulary: the file's keypoint set (built-in name, JSON path, dict, KeypointSet); None: the
            built-in set of its keypoint count.

    Raises:
        DatasetError: a malformed file, a keypoint count that is not the vocabulary's, keypoint names
            that are not its names, a person without a positive-size box.
    """
    src = Path(path)
    data = read_json(src)
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in _LISTS):
        raise DatasetError(f"{src}: a COCO keypoint file needs 'images' and 'annotations' lists")
    ks, how = _file_keypoint_set(data, src, vocabulary)
    check_category_keypoints(data.get("categories") or [], ks, src)
    file_area = _uses_file_area(data["annotations"], src)
    people: dict[object, list[Person]] = {}
    for i, ann in enumerate(data["annotations"]):
        rec = f"{src}: annotations[{i}] (id {ann.get('id', '?') if isinstance(ann, dict) else '?'})"
        if not isinstance(ann, dict) or any(k not in ann for k in ("image_id", "bbox")):
            raise DatasetError(f"{rec}: needs 'image_id', 'bbox' and 'keypoints'")
        kps = np.asarray(_flat_keypoints(ann, ks, rec), dtype=np.float64).reshape(-1, 3)
        if ann.get("iscrowd", 0) or not (kps[:, 2] > 0).any():
            continue
        box = ann["bbox"]
        ok = isinstance(box, list) and len(box) == 4 and all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in box)
        if not ok or not (box[2] > 0 and box[3] > 0):
            raise DatasetError(f"{rec}: 'bbox' must be [x, y, w, h] with a positive size, got {box!r}")
        x, y, w, h = (float(v) for v in box)
        area = ann.get("area") if file_area else 0.53 * w * h
        numeric = isinstance(area, (int, float)) and not isinstance(area, bool)
        if not (numeric and math.isfinite(area) and area > 0):
            raise DatasetError(f"{rec}: 'area' must be a positive number, got {area!r}")
        area = float(area)
        people.setdefault(ann["image_id"], []).append(Person(ann.get("id", i), (x, y, w, h), kps, area))
    images: dict[str, list[AnnotatedImage]] = {}
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or "id" not in im or "file_name" not in im:
            raise DatasetError(f"{src}: images[{i}] needs 'id' and 'file_name'")
        hw = (int(im["height"]), int(im["width"])) if "height" in im and "width" in im else None
        entry = AnnotatedImage(im["id"], str(im["file_name"]), hw, tuple(people.get(im["id"], ())))
        images.setdefault(Path(str(im["file_name"])).name, []).append(entry)
    return AnnotatedPeople(src, ks, images, how, AREA_FROM_FILE if file_area else AREA_FROM_BOX)
