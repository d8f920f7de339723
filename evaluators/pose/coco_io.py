"""Read COCO keypoint ground truth and results into the AP engine's arrays, with validation.

Every error names the file (or ``source`` label) and the offending record. JSON files are parsed
with orjson when it is installed (several times faster than the standard library on large
keypoint files), else with :mod:`json`; NaN/Infinity tokens, which orjson rejects, fall back to
:mod:`json` so that the keypoint checks can name the record.
"""

from __future__ import annotations

import gc
import json
import math
import mmap
import stat
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from evaluators.pose.coco_ap import KeypointDetections, KeypointGroundTruth
from evaluators.pose.coco_json import read_coco_lean
from evaluators.pose.wholebody_layout import WHOLEBODY_SPLIT_FIELDS, merge_wholebody_fields, split_layout

try:  # optional speed-up; the standard library gives the same objects
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None


def _check_file(p: Path, what: str) -> None:
    """Raise a clear error unless ``p`` is a non-empty regular file."""
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file (expected a {what} JSON file)") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{p}: is a directory, expected a {what} JSON file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{p}: not a regular file (a device or pipe), expected a {what} JSON file")
    if st.st_size < 64 and not p.read_bytes().strip():
        raise ValueError(f"{p}: empty file, expected a {what} JSON file")


def read_json_file(path: str | Path, what: str) -> Any:
    """Parse a JSON file, with errors that say what was expected.

    Args:
        path: the file.
        what: what the file should hold (for messages), e.g. ``"COCO keypoint results"``.

    Raises:
        FileNotFoundError: the path does not exist.
        ValueError: the path is a directory, not a regular file (``/dev/null``, a pipe), empty,
            or not valid JSON.
    """
    p = Path(path)
    _check_file(p, what)
    enabled = gc.isenabled()
    gc.disable()  # the parser makes only acyclic lists and dicts: no cycle collections while it runs
    try:
        return _parse(p, what)
    finally:
        if enabled:
            gc.enable()


def read_coco_file(path: str | Path, what: str, kind: str) -> Any:
    """Parse a COCO keypoint GT (``kind="gt"``) or results (``"results"``) file for the loaders.

    With pysimdjson installed, only the fields the loaders read, keypoints as float64 arrays
    (:func:`evaluators.pose.coco_json.read_coco_lean`, several times faster); otherwise, or for a
    file that path does not reproduce exactly, :func:`read_json_file`. The loaders give the same
    arrays and the same errors either way.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_json_file`.
    """
    p = Path(path)
    _check_file(p, what)
    enabled = gc.isenabled()
    gc.disable()
    try:
        data = read_coco_lean(p, kind)
    finally:
        if enabled:
            gc.enable()
    return read_json_file(p, what) if data is None else data


def _parse(p: Path, what: str) -> Any:
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if orjson is not None:  # parses straight from the mapped file: no copy of a large file
            try:
                with memoryview(mm) as view:
                    return orjson.loads(view)
            except orjson.JSONDecodeError:
                pass  # NaN tokens or malformed: the standard parser decides and words the error
        data = mm[:]
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: malformed JSON ({e}), expected a {what} JSON file") from None


def _load(obj_or_path: Any, what: str, kind: str, source: str | None = None) -> tuple[Any, str]:
    if isinstance(obj_or_path, (str, Path)):
        return read_coco_file(obj_or_path, what, kind), str(obj_or_path)
    return obj_or_path, source or f"<{what}>"


def _kpt_array(values: Any, num_keypoints: int | None, src: str, rec: str) -> np.ndarray:
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise ValueError(f"{src}: {rec}: 'keypoints' must be a list of numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{src}: {rec}: 'keypoints' holds non-numeric values ({e})") from e
    if arr.size % 3 or (num_keypoints is not None and arr.size != 3 * num_keypoints):
        want = f"{3 * num_keypoints} (3 x {num_keypoints} keypoints)" if num_keypoints else "a multiple of 3"
        raise ValueError(f"{src}: {rec}: 'keypoints' has {arr.size} values, expected {want}")
    if not np.isfinite(arr).all():
        bad = int(np.nonzero(~np.isfinite(arr))[0][0])
        raise ValueError(f"{src}: {rec}: keypoint {bad // 3} has a NaN or Inf value")
    return arr.reshape(-1, 3)


def _kpt_batch(lists: list, num_keypoints: int, src: str, recs, chunk: int = 256) -> np.ndarray:
    """N x K x 3 keypoints (stored plane by plane) of equal-length keypoint lists or float64 arrays.

    Converted ``chunk`` records at a time straight into the planar layout: each block is
    transposed while it is in cache (no second full-size copy). On failure, names the first bad
    record.
    """
    n = len(lists)
    out = np.empty((3, n, num_keypoints))
    k3 = 3 * num_keypoints
    for s in range(0, n, chunk):
        part = lists[s : s + chunk]
        try:  # lengths were checked per record
            if all(type(v) is np.ndarray for v in part):
                block = np.concatenate(part)
            else:
                block = np.fromiter(chain.from_iterable(part), np.float64, count=len(part) * k3)
        except (TypeError, ValueError):
            for j, values in enumerate(part):
                _kpt_array(values, num_keypoints, src, recs(s + j))
            raise
        block = block.reshape(len(part), num_keypoints, 3)
        finite = np.isfinite(block)
        if not finite.all():
            row = int(np.nonzero(~finite.all((1, 2)))[0][0])
            kpt = int(np.nonzero(~finite[row].all(1))[0][0])
            raise ValueError(f"{src}: {recs(s + row)}: keypoint {kpt} has a NaN or Inf value")
        out[:, s : s + len(part)] = block.transpose(2, 0, 1)
    return out.transpose(1, 2, 0)


def _bbox_batch(boxes: list, src: str, recs) -> np.ndarray:
    """G x 4 boxes; a non-numeric or non-finite box raises an error naming its record."""
    try:
        arr = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    except (TypeError, ValueError):
        arr = None
    bad = None if arr is None else np.nonzero(~np.isfinite(arr).all(1))[0]
    if arr is None or bad.size:
        for j, bbox in enumerate(boxes):
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in bbox):
                raise ValueError(f"{src}: {recs(j)}: 'bbox' must hold 4 finite numbers, got {bbox!r}")
    return arr


def _number_batch(values: list, key: str, src: str, recs, allow_nan: bool = False) -> np.ndarray:
    """Float64 array of per-record numbers; a non-number or non-finite value names its record."""
    ok = True
    try:
        arr = np.array(values, dtype=np.float64).reshape(-1)
        ok = arr.shape[0] == len(values)
    except (TypeError, ValueError):
        arr, ok = None, False
    bad_types = [j for j, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, (int, float))]
    if not ok or bad_types:
        j = bad_types[0] if bad_types else 0
        raise ValueError(f"{src}: {recs(j)}: {key!r} must be a finite number, got {values[j]!r}")
    bad = ~np.isfinite(arr) & ~(np.isnan(arr) if allow_nan else False)
    if bad.any():
        j = int(np.nonzero(bad)[0][0])
        raise ValueError(f"{src}: {recs(j)}: {key!r} must be a finite number, got {values[j]!r}")
    return arr


def _check_len(values: Any, num_keypoints: int | None, src: str, rec: str) -> int:
    """Cheap per-record check of the keypoint list length; returns K."""
    if not isinstance(values, (list, tuple)):
        return _kpt_array(values, num_keypoints, src, rec).shape[0]
    n = len(values)
    if n % 3 or n == 0 or (num_keypoints is not None and n != 3 * num_keypoints):
        _kpt_array(values, num_keypoints, src, rec)
        raise ValueError(f"{src}: {rec}: 'keypoints' has {n} values")
    return n // 3




def load_coco_gt(
    obj_or_path: Any, num_keypoints: int | None = None, use_area: bool = True, source: str | None = None
) -> tuple[KeypointGroundTruth, int]:
    """Read a COCO keypoint ground-truth dataset.

    Args:
        obj_or_path: path of the JSON file or the loaded dict.
        num_keypoints: expected K (None: taken from the first annotation).
        use_area: require an ``area`` on every annotation (what ``use_area=True`` needs).
        source: the name errors give a loaded dict (default ``<COCO keypoint ground truth>``).

    Returns:
        ``(ground truth arrays, K)``. Annotations of images not listed in ``images`` are skipped,
        as COCOeval skips them. A COCO-WholeBody file in its distributed layout (body in
        ``keypoints``, the rest in ``foot_kpts``, ``face_kpts``, ``lefthand_kpts``,
        ``righthand_kpts``) is read as its 133 keypoints in the flattened order.
    """
    data, src = _load(obj_or_path, "COCO keypoint ground truth", "gt", source)
    if not isinstance(data, dict):
        raise ValueError(f"{src}: a COCO ground truth must be a JSON object, got {type(data).__name__}")
    for key in ("images", "annotations"):
        if not isinstance(data.get(key), list):
            raise ValueError(f"{src}: missing the {key!r} list")
    image_ids = []
    for i, img in enumerate(data["images"]):
        if not isinstance(img, dict) or "id" not in img:
            raise ValueError(f"{src}: images[{i}] has no 'id'")
        image_ids.append(img["id"])
    image_ids = sorted(set(image_ids))
    pos = {iid: i for i, iid in enumerate(image_ids)}
    cats = data.get("categories")
    if not isinstance(cats, list):
        # xtcocotools' loadRes copies the GT's categories and fails with KeyError: 'categories'
        raise ValueError(
            f"{src}: missing the 'categories' list (xtcocotools cannot evaluate such a GT either); "
            'add e.g. "categories": [{"id": 1, "name": "person"}]'
        )
    bad_cat = [i for i, c in enumerate(cats) if not isinstance(c, dict) or "id" not in c]
    if bad_cat:
        raise ValueError(f"{src}: categories[{bad_cat[0]}] has no 'id'")
    category_ids = sorted({c["id"] for c in cats})

    anns = data["annotations"]

    def rec_name(i: int) -> str:
        a = anns[i]
        return f"annotations[{i}] (id {a.get('id', '?') if isinstance(a, dict) else '?'})"

    k_expected = num_keypoints
    n3 = None if num_keypoints is None else 3 * num_keypoints
    split = split_layout(anns, src, "annotations")
    if split and num_keypoints not in (None, 133):
        raise ValueError(
            f"{src}: COCO-WholeBody split layout ({', '.join(WHOLEBODY_SPLIT_FIELDS)} next to 'keypoints'): "
            f"133 keypoints, but {num_keypoints} were expected (use the coco_wholebody133 keypoint set)"
        )
    img, cat, areas, boxes, crowd, kps, kept, counts = [], [], [], [], [], [], [], []
    for i, ann in enumerate(anns):
        try:
            iid, kp = ann["image_id"], ann["keypoints"]
        except (KeyError, TypeError):
            raise ValueError(f"{src}: {rec_name(i)} needs 'image_id' and 'keypoints'") from None
        if split:
            kp = merge_wholebody_fields(ann, src, rec_name(i))
        if (type(kp) is not list and type(kp) is not np.ndarray) or len(kp) != n3:
            k_expected = _check_len(kp, k_expected, src, rec_name(i))
            n3 = 3 * k_expected
        aid = ann.get("id", 0)
        if isinstance(aid, (int, float)) and aid < 0:
            raise ValueError(f"{src}: {rec_name(i)}: annotation ids must be >= 0")
        p = pos.get(iid)
        if p is None:
            continue
        bbox = ann.get("bbox")
        if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
            raise ValueError(f"{src}: {rec_name(i)}: 'bbox' must be [x, y, w, h], got {bbox!r}")
        area = ann.get("area")
        if area is None:
            if use_area:
                raise ValueError(
                    f"{src}: {rec_name(i)}: no 'area' (needed with use_area=True; for files without areas "
                    "pass --no-area, or use_area=False in Python)"
                )
            area = float("nan")
        img.append(p)
        cat.append(ann.get("category_id", 1))
        areas.append(area)
        boxes.append(bbox)
        crowd.append(ann.get("iscrowd", 0))
        count = ann.get("num_keypoints")
        numeric = isinstance(count, (int, float)) and not isinstance(count, bool)
        counts.append(float(count) if numeric else np.nan)
        kps.append(kp)
        kept.append(i)
    k = k_expected or 0

    def kept_name(j: int) -> str:
        return rec_name(kept[j])

    gt = KeypointGroundTruth(
        image_ids=image_ids,
        category_ids=category_ids,
        image_index=np.array(img, dtype=np.int64),
        category=np.array(cat),
        keypoints=_kpt_batch(kps, k, src, kept_name),
        area=_number_batch(areas, "area", src, kept_name, allow_nan=not use_area),
        bbox=_bbox_batch(boxes, src, kept_name),
        iscrowd=np.array([bool(c) for c in crowd], dtype=bool),
        num_keypoints=np.array(counts, dtype=np.float64),
    )
    return gt, k


def load_coco_results(
    obj_or_path: Any, gt: KeypointGroundTruth, num_keypoints: int, source: str | None = None
) -> KeypointDetections:
    """Read COCO keypoint results (a list of ``{image_id, category_id, keypoints, score}``).

    Like ``COCO.loadRes``: when the first result has a non-empty ``bbox``, every result's area is
    its box area; otherwise the area is that of the box around its keypoints. Results in the
    COCO-WholeBody split layout are flattened to 133 keypoints as the GT (:func:`load_coco_gt`).

    Args:
        obj_or_path: path of the JSON file or the loaded list.
        gt: the ground truth (result image ids must be among its images).
        num_keypoints: K.
        source: the name errors give a loaded list (default ``<COCO keypoint results>``).

    Returns:
        Detection arrays.
    """
    data, src = _load(obj_or_path, "COCO keypoint results", "results", source)
    if not isinstance(data, list):
        raise ValueError(f"{src}: COCO results must be a JSON list of objects, got {type(data).__name__}")
    pos = {iid: i for i, iid in enumerate(gt.image_ids)}
    use_bbox = bool(data) and isinstance(data[0], dict) and bool(data[0].get("bbox"))
    n3 = 3 * num_keypoints

    def rec_name(i: int) -> str:
        r = data[i]
        return f"result[{i}] (image_id {r.get('image_id')!r})" if isinstance(r, dict) else f"result[{i}]"

    split = split_layout(data, src, "result")
    img, cat, kps, score, area = [], [], [], [], []
    for i, r in enumerate(data):
        try:
            iid, kp, sc = r["image_id"], r["keypoints"], r["score"]
        except (KeyError, TypeError):
            raise ValueError(
                f"{src}: {rec_name(i)} is not an object with 'image_id', 'keypoints' and 'score'"
            ) from None
        if split:
            kp = merge_wholebody_fields(r, src, rec_name(i))
        p = pos.get(iid)
        if p is None:
            raise ValueError(f"{src}: {rec_name(i)}: image id not in the ground truth's images")
        if (type(kp) is not list and type(kp) is not np.ndarray) or len(kp) != n3:
            _check_len(kp, num_keypoints, src, rec_name(i))
        kps.append(kp)
        score.append(sc)
        img.append(p)
        cat.append(r.get("category_id", 1))
        if use_bbox:
            bb = r.get("bbox")
            if not isinstance(bb, (list, tuple)) or len(bb) != 4:
                raise ValueError(f"{src}: {rec_name(i)}: 'bbox' must be [x, y, w, h] (result[0] has one)")
            area.append(float(bb[2]) * float(bb[3]))
    return KeypointDetections(
        image_index=np.array(img, dtype=np.int64),
        category=np.array(cat),
        keypoints=_kpt_batch(kps, num_keypoints, src, rec_name),
        score=_number_batch(score, "score", src, rec_name),
        area=np.array(area, dtype=np.float64) if use_bbox else None,
    )
