"""Fast reading of COCO keypoint files: only the fields the loaders read, keypoints as float64 arrays.

A COCO keypoint file is mostly keypoint numbers (2,500 images x 308 keypoints: 11 million values).
A general parser (orjson, :mod:`json`) makes a Python float of each, which the loaders then copy
into arrays and free again; that was most of the time of ``sapiens2-bench eval pose``. With
pysimdjson installed, :func:`read_coco_lean` parses the file into simdjson's lazy document and
copies each ``keypoints`` list straight into a float64 array (``Array.as_buffer``, no Python
floats), and every other field the loaders read into plain Python values. Fields the loaders never
read (``segmentation``, ``num_keypoints``, image sizes, ...) are skipped.

The values are the ones :mod:`json` gives: numbers are parsed with correct rounding, an integer
keypoint becomes the same float, and anything this path does not reproduce exactly sends the
whole file to the general parser, whose objects the loaders validate and word errors for:
invalid JSON (also NaN/Infinity tokens, which :mod:`json` accepts), integers beyond 64 bits, an
object with a repeated key (:mod:`json` keeps the last value, simdjson's lookup the first), or no
pysimdjson. A ``keypoints`` value that is not a flat list of numbers (strings, booleans, nested
lists) is handed over as a plain list, so the loaders' messages stay the same.

Example:
    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "res.json"
    >>> _ = p.write_text(json.dumps([{"image_id": 1, "score": 0.5, "keypoints": [1, 2.5, 2], "x": 0}]))
    >>> recs = read_coco_lean(p, "results") or json.loads(p.read_text())  # None: no pysimdjson
    >>> sorted(recs[0]), [float(v) for v in recs[0]["keypoints"]]
    (['image_id', 'keypoints', 'score'], [1.0, 2.5, 2.0])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# COCO-WholeBody's distributed layout: body in ``keypoints``, the other parts in these fields
WHOLEBODY_SPLIT_FIELDS = ("foot_kpts", "face_kpts", "lefthand_kpts", "righthand_kpts")
KEYPOINT_FIELDS = ("keypoints", *WHOLEBODY_SPLIT_FIELDS)
GT_FIELDS = ("id", "image_id", "category_id", "iscrowd", "area", "bbox", "num_keypoints", *KEYPOINT_FIELDS)
IMAGE_FIELDS = ("id", "crowdIndex")  # CrowdPose's crowd index splits its images into easy / medium / hard
TOP_FIELDS = ("keypoint_set", "area_source")  # what ``data import`` writes beside the COCO lists
RESULT_FIELDS = ("image_id", "category_id", "score", "bbox", *KEYPOINT_FIELDS)
_MISSING = object()


class _Fallback(Exception):
    """The lean path cannot reproduce :mod:`json`'s objects for this file."""


def _plain(value: Any, sj) -> Any:
    """A plain Python value (lists and dicts all the way down) of a simdjson value."""
    t = type(value)
    if t is sj.Array:
        return value.as_list()
    if t is sj.Object:
        return value.as_dict()  # a repeated key keeps its last value, as json does
    return value


def _check_unique_keys(obj) -> None:
    n = len(obj)
    if n > 1 and len(set(obj.keys())) != n:
        raise _Fallback("repeated key")


def _keypoints(arr) -> Any:
    """Float64 array of a flat numeric list; anything else as a plain list (the loaders word errors)."""
    n = len(arr)
    try:
        values = np.frombuffer(arr.as_buffer(of_type="d"), dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):  # strings, booleans, null inside
        return arr.as_list()
    return values if values.size == n else arr.as_list()  # nested lists flatten: not a flat list


def _records(value, fields: tuple[str, ...], sj) -> Any:
    """Each simdjson object of a list as a dict of the ``fields`` it has (any other value: plain)."""
    array, obj_type = sj.Array, sj.Object
    if type(value) is not array:
        return _plain(value, sj)
    out = []
    for obj in value:
        if type(obj) is not obj_type:
            out.append(_plain(obj, sj))
            continue
        _check_unique_keys(obj)
        rec = {}
        for key in fields:
            v = obj.get(key, _MISSING)
            if v is _MISSING:
                continue
            t = type(v)
            if t is array:
                v = _keypoints(v) if key in KEYPOINT_FIELDS else v.as_list()
            elif t is obj_type:
                v = v.as_dict()
            rec[key] = v
        out.append(rec)
    return out


def _lean(doc, kind: str, sj) -> Any:
    if kind == "results":
        return _records(doc, RESULT_FIELDS, sj)
    if type(doc) is not sj.Object:
        return _plain(doc, sj)
    _check_unique_keys(doc)
    out: dict[str, Any] = {}
    for key, fields in (("images", IMAGE_FIELDS), ("annotations", GT_FIELDS)):
        value = doc.get(key, _MISSING)
        if value is not _MISSING:
            out[key] = _records(value, fields, sj)
    for key in ("categories", *TOP_FIELDS):
        value = doc.get(key, _MISSING)
        if value is not _MISSING:
            out[key] = _plain(value, sj)
    return out


def read_coco_lean(path: str | Path, kind: str) -> Any | None:
    """The loaders' view of a COCO keypoint file, or None when the general parser must read it.

    Args:
        path: a regular file (the caller has checked it).
        kind: ``"gt"`` (an object: ``images`` with ``id``, ``annotations`` with the fields in
            ``GT_FIELDS``, ``categories`` whole) or ``"results"`` (a list of objects with the
            fields in ``RESULT_FIELDS``).

    Returns:
        The lean objects (``keypoints`` as float64 arrays), or None: pysimdjson is not installed,
        or the file is one the lean path does not reproduce exactly (see the module docstring).
    """
    try:
        import simdjson as sj
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    parser = sj.Parser()
    try:
        doc = parser.load(str(path))
    except (ValueError, RuntimeError, OSError):  # invalid JSON, NaN, big integers: json decides
        return None
    try:
        return _lean(doc, kind, sj)
    except (_Fallback, ValueError, RuntimeError, TypeError):
        return None
    finally:
        del doc
