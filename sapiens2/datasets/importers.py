"""``sapiens2-bench data import FORMAT SRC --out DIR``: split folders from the formats people have.

Each importer validates the source and writes a split folder (``split.json`` + one manifest per
task) whose records point at the user's image files (absolute paths, no copies). The only files
written besides the manifests are those no source file holds: person masks rasterised from COCO
polygons / RLE (``seg/<image_id>.png``). Every manifest names its vocabulary (``keypoint_set`` in
the pose manifest, ``label_set`` in the seg manifest). The folder is assembled next to ``DIR`` and
renamed into place, so ``DIR`` is either complete or absent; an existing ``DIR`` is an error unless
``overwrite`` (and then only an earlier split or an empty folder is replaced).

Formats (``FORMATS``): ``coco`` (COCO-17 keypoints, plus person masks when annotations carry
``segmentation``), ``coco-wholebody`` (both layouts, written as the flattened 133), ``crowdpose``,
``ochuman``, ``halpe``, ``aic`` (AI Challenger), ``mhp`` (MHP: MPII's 16 names and sigmas),
``humanart`` (Human-Art's COCO-17 ``keypoints``), ``humanart21`` (its ``keypoints_21``),
``posetrack18`` (COCO-style files of those sets; keypoint names are compared up to spelling, so
AI Challenger's ``"Right Shoulder"`` is ``right_shoulder``), ``mpii`` (mmpose's MPII JSON, optional
head boxes for PCKh), ``coco-person-masks`` (masks only), and the body-part PNG folders ``lip``,
``cihp``, ``atr``, ``pascal-person-part`` and ``parts`` (any label set) in
:mod:`sapiens2.datasets.import_parts`.

Area: an annotation's ``area`` is the source's; a source without any (CrowdPose, AI Challenger,
PoseTrack18) gets ``w * h * 0.53`` of its box, the official convention of those sets (xtcocotools
``use_area=False``, mmpose's ``BaseCocoStyleDataset``); a source where only some annotations have
one is an error. The pose manifest and ``split.json`` say which (``area_source``). CrowdPose's
``num_keypoints`` (its visible joints, which its official evaluation reads) and ``crowdIndex`` are kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from sapiens2.utils_io import default_mode, read_json, write_json_atomic
from sapiens2.vocab import WHOLEBODY_SPLIT_SIZES, KeypointSet, VocabError, keypoint_set

from .import_mpii import read_mpii
from .import_parts import PART_LAYOUTS, coco_person_masks, part_folder_manifest
from .import_paths import image_path
from .io import DatasetError
from .synth.writer import SplitExistsError, _move_into_place, _replaceable

# COCO-style keypoint formats -> their keypoint set
COCO_STYLE = {
    "coco": "coco17",
    "coco-wholebody": "coco_wholebody133",
    "crowdpose": "crowdpose14",
    "ochuman": "ochuman17",
    "halpe": "halpe136",
    "aic": "aic14",
    "mhp": "mpii16",  # MHP's 16 keypoints: MPII's names and sigmas (mmpose's mhp.py)
    "humanart": "coco17",  # Human-Art's `keypoints`: COCO-17's names and sigmas (mmpose's humanart.py)
    "humanart21": "humanart21",
    "posetrack18": "posetrack18",
}
KEYPOINT_FIELD = {"humanart21": "keypoints_21"}  # formats whose keypoints are in another field
AREA_FROM_SOURCE = "the source's 'area'"
AREA_FROM_BOX = "w * h * 0.53 of the box (the source has no 'area'; xtcocotools use_area=False, mmpose)"


def _vocab_entry(ks: KeypointSet, given) -> str | dict:
    """How a manifest names its keypoint set: the built-in name, or the whole user set inline."""
    if isinstance(given, (str, os.PathLike)) and not str(given).lower().endswith(".json"):
        return ks.name
    if given is None:
        return ks.name
    return ks.to_dict()


def check_category_keypoints(categories, ks: KeypointSet, src) -> None:
    """The keypoint names each COCO category lists are ``ks``'s (WholeBody lists its 17 body points only,
    Human-Art its 17 COCO points beside the 21 of ``keypoints_21``: those are checked as ``ks``'s first 17).

    Raises:
        DatasetError: a category names other keypoints (naming the file and the category).
    """
    for c in categories:
        names = c.get("keypoints") if isinstance(c, dict) else None
        if names:
            try:
                if ks.num_keypoints in (133, 21) and len(names) == 17:
                    head = keypoint_set({"dataset_name": ks.name, "keypoints": list(ks.names[:17]),
                                         "sigmas": [1.0] * 17})  # fmt: skip
                    head.check_names(names, f"{src}: category {c.get('id')}")
                    continue
                ks.check_names(names, f"{src}: category {c.get('id')}")
            except VocabError as e:
                raise DatasetError(str(e)) from None


def _numbers(values, what: str, where: str) -> np.ndarray:
    """``values`` as float64 when it is a list of finite numbers; else an error naming the record."""
    arr = np.asarray(values) if isinstance(values, list) else np.asarray([None])
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))), values) \
            if isinstance(values, list) else values
        raise DatasetError(f"{where}: {what} must hold numbers, got {bad!r} ({type(bad).__name__})")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise DatasetError(f"{where}: {what} holds NaN or Inf")
    return arr


def _flat_keypoints(ann: dict, ks: KeypointSet, where: str, field: str = "keypoints") -> list[float]:
    """The annotation's K x 3 keypoints (from ``field``), flattening COCO-WholeBody's split layout."""
    split = [f for f in WHOLEBODY_SPLIT_SIZES if f != "keypoints" and f in ann]
    if split:
        if ks.num_keypoints != 133:
            raise DatasetError(
                f"{where}: holds COCO-WholeBody split fields ({', '.join(split)}): this is COCO-WholeBody "
                f"(133 keypoints), not {ks.name}; import it as `coco-wholebody`"
            )
        out: list[float] = []
        for field, k in WHOLEBODY_SPLIT_SIZES.items():
            vals = ann.get(field)
            if not isinstance(vals, list) or len(vals) != 3 * k:
                n = len(vals) if isinstance(vals, list) else "no"
                raise DatasetError(
                    f"{where}: COCO-WholeBody split layout needs {field!r} with {3 * k} values, got {n}"
                )
            out.extend(_numbers(vals, repr(field), where).tolist())
        return out
    vals = ann.get(field)
    if not isinstance(vals, list) or len(vals) != 3 * ks.num_keypoints:
        n = len(vals) if isinstance(vals, list) else "no"
        raise DatasetError(
            f"{where}: {field!r} has {n} values, expected {3 * ks.num_keypoints} "
            f"({ks.num_keypoints} keypoints of {ks.name} x 3)"
        )
    return _numbers(vals, repr(field), where).tolist()


def read_coco_keypoints(src: Path, images_dir: Path, ks: KeypointSet, field: str = "keypoints") -> dict:
    """A checked COCO keypoint dict with flat K-keypoint annotations and absolute image paths.

    ``field``: the annotations' keypoint field (Human-Art's 21 are in ``keypoints_21``). The dict's
    ``area_source`` says where the areas come from (see the module docstring).
    """
    data = read_json(src)
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("images"), list)
        or not isinstance(data.get("annotations"), list)
    ):
        raise DatasetError(f"{src}: a COCO keypoint file needs 'images' and 'annotations' lists")
    cats = data.get("categories") or [{"id": 1, "name": "person"}]
    check_category_keypoints(cats, ks, src)
    images, seen = [], set()
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or "id" not in im or "file_name" not in im:
            raise DatasetError(f"{src}: images[{i}] needs 'id' and 'file_name'")
        if im["id"] in seen:
            raise DatasetError(f"{src}: images[{i}]: duplicate image id {im['id']!r}")
        seen.add(im["id"])
        path = image_path(images_dir, im["file_name"], f"{src}: image id {im['id']}")
        keep = ("id", "height", "width", "crowdIndex")
        images.append({k: im[k] for k in keep if k in im} | {"file_name": str(path)})
    anns, ann_ids = [], set()
    with_area = [isinstance(a, dict) and a.get("area") is not None for a in data["annotations"]]
    if any(with_area) and not all(with_area):
        i = with_area.index(False)
        raise DatasetError(
            f"{src}: annotations[{i}] has no 'area' while others have one: the OKS scale would mix the "
            "source's areas with 0.53 x box areas; give every annotation an 'area' or none"
        )
    for i, ann in enumerate(data["annotations"]):
        where = f"{src}: annotations[{i}] (id {ann.get('id', '?') if isinstance(ann, dict) else '?'})"
        if not isinstance(ann, dict) or any(k not in ann for k in ("id", "image_id", "bbox")):
            raise DatasetError(f"{where}: needs 'id', 'image_id', 'bbox' and 'keypoints'")
        if ann["image_id"] not in seen:
            raise DatasetError(f"{where}: image_id {ann['image_id']!r} is not in 'images'")
        if ann["id"] in ann_ids:
            raise DatasetError(f"{where}: duplicate annotation id")
        ann_ids.add(ann["id"])
        bbox = ann["bbox"]
        if not isinstance(bbox, list) or len(bbox) != 4:
            raise DatasetError(f"{where}: 'bbox' must be [x, y, w, h], got {bbox!r}")
        bbox = _numbers(bbox, "'bbox' [x, y, w, h]", where).tolist()
        out = {
            k: ann[k]
            for k in (
                "id",
                "image_id",
                "bbox",
                "iscrowd",
                "area",
                "category_id",
                "segmentation",
                "num_keypoints",
                "head_size",
            )
            if k in ann
        }
        out["bbox"] = bbox
        out["keypoints"] = _flat_keypoints(ann, ks, where, field)
        count = ann.get("num_keypoints")  # CrowdPose counts its visible joints only: kept as the source says
        if isinstance(count, bool) or not isinstance(count, int):
            out["num_keypoints"] = int((np.asarray(out["keypoints"]).reshape(-1, 3)[:, 2] > 0).sum())
        out.setdefault("category_id", cats[0].get("id", 1))
        out.setdefault("iscrowd", 0)
        if out.get("area") is None:
            out["area"] = bbox[2] * bbox[3] * 0.53  # xtcocotools' product order: the same float
        else:
            out["area"] = float(_numbers([out["area"]], "'area'", where)[0])
        anns.append(out)
    source = AREA_FROM_SOURCE if all(with_area) else AREA_FROM_BOX
    return {"images": images, "annotations": anns, "categories": cats, "area_source": source}


def read_coco_person_instances(src: Path, images_dir: Path) -> dict:
    """The person annotations of a COCO instances file (any categories; those named ``person`` kept)."""
    data = read_json(src)
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), list) for k in ("images", "annotations")
    ):
        raise DatasetError(f"{src}: a COCO instances file needs 'images' and 'annotations' lists")
    person = {
        c["id"] for c in data.get("categories") or [] if isinstance(c, dict) and c.get("name") == "person"
    }
    if not person:
        raise DatasetError(f"{src}: no category named 'person' in 'categories'")
    images, seen = [], set()
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or "id" not in im or "file_name" not in im:
            raise DatasetError(f"{src}: images[{i}] needs 'id' and 'file_name'")
        seen.add(im["id"])
        path = image_path(images_dir, im["file_name"], f"{src}: image id {im['id']}")
        images.append({k: im[k] for k in ("id", "height", "width") if k in im} | {"file_name": str(path)})
    anns = []
    for i, a in enumerate(data["annotations"]):
        if not isinstance(a, dict) or any(k not in a for k in ("id", "image_id", "category_id")):
            raise DatasetError(f"{src}: annotations[{i}] needs 'id', 'image_id' and 'category_id'")
        if a["category_id"] not in person:
            continue  # another category: not a person, i.e. background of a person mask
        if a["image_id"] not in seen:
            raise DatasetError(f"{src}: annotations[{i}]: image_id {a['image_id']!r} is not in 'images'")
        anns.append({k: a[k] for k in ("id", "image_id", "iscrowd", "segmentation") if k in a})
    return {"images": images, "annotations": anns, "categories": [{"id": min(person), "name": "person"}]}


def _pose_manifest(coco: dict, ks: KeypointSet, entry) -> dict:
    cat_id = coco["categories"][0].get("id", 1)
    anns = [{k: v for k, v in a.items() if k != "segmentation"} for a in coco["annotations"]]
    return {
        "keypoint_set": entry,
        "area_source": coco.get("area_source", AREA_FROM_SOURCE),
        "images": coco["images"],
        "annotations": anns,
        "categories": [{"id": cat_id, "name": "person", "keypoints": list(ks.names),
                        "skeleton": [list(p) for p in ks.skeleton]}],
    }  # fmt: skip


def write_split(
    out: Path,
    fmt: str,
    src: Path,
    manifests: dict[str, dict],
    files: dict[str, bytes],
    overwrite: bool = False,
    extra: dict | None = None,
) -> Path:
    """Write ``split.json``, the manifests and the derived files into a new split folder ``out``."""
    out = Path(out)
    if os.path.lexists(out):
        if not overwrite:
            raise SplitExistsError(f"{out} already exists (pass --overwrite to replace it)")
        if not _replaceable(out):
            raise ValueError(f"{out}: not a split (no split.json) and not empty; refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        os.chmod(tmp, default_mode(directory=True))
        for rel, data in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        tasks = {}
        for task, manifest in manifests.items():
            write_json_atomic(tmp / f"{task}.json", manifest, indent=None)
            tasks[task] = f"{task}.json"
        n = len(
            {r["image"] for m in manifests.values() for r in m.get("records", [])}
            | {im["file_name"] for m in manifests.values() for im in m.get("images", [])}
        )
        info = {"name": out.name, "generator": f"import {fmt}", "source": str(src), "n": n, "tasks": tasks}
        write_json_atomic(tmp / "split.json", {**info, **(extra or {})})
        _move_into_place(tmp, out, overwrite)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def import_dataset(
    fmt: str,
    src,
    out,
    *,
    images=None,
    keypoints=None,
    headboxes=None,
    masks: bool = True,
    labels=None,
    label_set=None,
    overwrite: bool = False,
) -> Path:
    """Import ``src`` in format ``fmt`` as a split folder ``out`` (see the module docstring).

    Args:
        fmt: one of ``FORMATS``.
        src: the annotation file (COCO-style, MPII) or the dataset folder (part PNG folders).
        out: the new split folder.
        images: folder the images' file names are relative to (default: the annotation file's folder).
        keypoints: keypoint set (name or JSON) instead of the format's.
        headboxes: MPII head boxes (``mpii_gt_val.mat``) for PCKh.
        masks: also write person masks when COCO annotations carry ``segmentation``.
        labels: label folder of a part-PNG dataset (default: the layout's).
        label_set: label set of a part-PNG dataset (default: the layout's).
        overwrite: replace an earlier split at ``out``.
    """
    src = Path(src)
    if fmt in PART_LAYOUTS:
        manifest, entry = part_folder_manifest(fmt, src, images, labels, label_set)
        return write_split(Path(out), fmt, src, {"seg": manifest}, {}, overwrite, {"label_set": entry})
    if fmt not in FORMATS:
        raise ValueError(f"data import: unknown format {fmt!r}; known: {sorted(FORMATS)}")
    if not src.is_file():
        raise DatasetError(f"{src}: no such annotation file")
    images_dir = Path(images) if images is not None else src.parent
    if fmt == "mpii":
        ks = keypoint_set(keypoints or "mpii16")
        coco = read_mpii(src, images_dir, Path(headboxes) if headboxes else None)
        if ks.num_keypoints != 16:
            raise DatasetError(f"{src}: MPII has 16 joints; keypoint set {ks.name} has {ks.num_keypoints}")
    elif fmt == "coco-person-masks":
        ks = None
        coco = read_coco_person_instances(src, images_dir)
    else:
        ks = keypoint_set(keypoints or COCO_STYLE.get(fmt, "coco17"))
        coco = read_coco_keypoints(src, images_dir, ks, KEYPOINT_FIELD.get(fmt, "keypoints"))
    manifests, files, extra = {}, {}, ({"keypoint_set": ks.name} if ks else {})
    if ks is not None:
        extra["area_source"] = coco.get("area_source", AREA_FROM_SOURCE)
    if ks is not None:
        manifests["pose"] = _pose_manifest(coco, ks, _vocab_entry(ks, keypoints))
    has_seg = any("segmentation" in a for a in coco["annotations"])
    if fmt == "coco-person-masks" or (masks and has_seg):
        if not has_seg:
            raise DatasetError(f"{src}: no annotation has a 'segmentation' (polygon or RLE person mask)")
        manifests["seg"], files = coco_person_masks(coco, src)
        extra["label_set"] = "person2"
    return write_split(Path(out), fmt, src, manifests, files, overwrite, extra)


FORMATS = (*COCO_STYLE, "mpii", "coco-person-masks", "lip", "cihp", "atr", "pascal-person-part", "parts")
