"""Seg manifests for ``data import``: COCO person masks (pycocotools) and body-part PNG folders.

Person masks: each image's label map is 1 where a non-crowd person annotation's polygon or RLE
covers it, 255 (ignored) where only a crowd region does, 0 elsewhere (label set ``person2``).

Body-part folders (LIP, CIHP, ATR, Pascal-Person-Part, or any ``parts`` folder with a label set):
label PNGs paired with images by file stem. Every label file needs its image; images without a
label file are not in the split (their count is printed and stored as ``unlabelled_images``).
Every label map is read once at import: values outside the label set, or a size other than its
image's, are errors naming the file.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from sapiens2.vocab import VocabError, label_set

from .io import DatasetError, read_label

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# layout -> (label set, candidate (images, labels) sub-folders, first that exists wins)
PART_LAYOUTS = {
    "lip": ("lip20", [("TrainVal_images/val_images", "TrainVal_parsing_annotations/val_segmentations"),
                      ("val_images", "val_segmentations"), ("images", "labels")]),
    "cihp": ("cihp20", [("Images", "Category_ids"), ("val/Images", "val/Category_ids"),
                        ("images", "labels")]),
    "atr": ("atr18", [("JPEGImages", "SegmentationClassAug"), ("humanparsing/JPEGImages",
                      "humanparsing/SegmentationClassAug"), ("images", "labels")]),
    "pascal-person-part": ("pascal_person_part7", [("JPEGImages", "SegmentationPart"), ("images", "labels")]),
    "parts": (None, [("images", "labels")]),
}  # fmt: skip


def _mask_api():
    from pycocotools import mask  # a core dependency, imported only when masks are decoded

    return mask


def decode_segmentation(seg, h: int, w: int, where: str) -> np.ndarray:
    """Bool H x W mask of a COCO ``segmentation`` (polygons, uncompressed or compressed RLE)."""
    api = _mask_api()
    try:
        if isinstance(seg, list):
            if not seg:
                return np.zeros((h, w), bool)
            rle = api.merge(api.frPyObjects([list(map(float, p)) for p in seg], h, w))
        elif isinstance(seg, dict) and "counts" in seg and "size" in seg:
            if [int(v) for v in seg["size"]] != [h, w]:
                raise DatasetError(f"{where}: RLE size {seg['size']} is not the image's {[h, w]} (H, W)")
            counts = seg["counts"]
            rle = (
                api.frPyObjects(seg, h, w)
                if isinstance(counts, list)
                else {"size": [h, w], "counts": counts.encode() if isinstance(counts, str) else counts}
            )
        else:
            raise DatasetError(f"{where}: 'segmentation' must be polygons or an RLE {{counts, size}}")
        return np.asarray(api.decode(rle), dtype=bool).reshape(h, w)
    except DatasetError:
        raise
    except Exception as e:  # the C API raises assorted types on malformed input
        raise DatasetError(f"{where}: cannot decode 'segmentation' ({type(e).__name__}: {e})") from None


def _png(arr: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr.astype(np.uint8), mode="L").save(buf, format="PNG")
    return buf.getvalue()


EXIF_ORIENTATION = 0x0112
_TRANSPOSING = (5, 6, 7, 8)  # EXIF orientations that swap width and height


def _image_hw(path: str) -> tuple[int, int]:
    """(H, W) of the image as the readers see it: upright, its EXIF Orientation applied."""
    return _image_hw_and_orientation(path)[0]


def _image_hw_and_orientation(path: str) -> tuple[tuple[int, int], int]:
    from PIL import Image

    with Image.open(path) as im:
        w, h = im.size
        try:
            orientation = int(im.getexif().get(EXIF_ORIENTATION, 1))
        except (TypeError, ValueError):
            orientation = 1
    return ((w, h) if orientation in _TRANSPOSING else (h, w)), orientation


def coco_person_masks(coco: dict, src: Path) -> tuple[dict, dict[str, bytes]]:
    """(seg manifest, ``{relative path: PNG bytes}``) of the person masks of a checked COCO dict."""
    by_image: dict = {}
    for ann in coco["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)
    records, files = [], {}
    for im in coco["images"]:
        anns = by_image.get(im["id"], [])
        if not any("segmentation" in a for a in anns):
            continue  # no mask annotated on this image: not in the seg split
        (h, w), orientation = _image_hw_and_orientation(im["file_name"])
        if ("height" in im and int(im["height"]) != h) or ("width" in im and int(im["width"]) != w):
            turned = (
                f" upright (its EXIF Orientation {orientation} turns the stored {w} x {h} frame; annotations "
                "are read in the displayed frame, as every reader shows the image)"
                if orientation in _TRANSPOSING else ""
            )
            raise DatasetError(
                f"{src}: image id {im['id']}: the JSON says {im.get('height')} x {im.get('width')} (H x W), "
                f"the file {im['file_name']} is {h} x {w}{turned}"
            )
        label = np.zeros((h, w), np.uint8)
        crowd = np.zeros((h, w), bool)
        for a in anns:
            if "segmentation" not in a:
                continue
            m = decode_segmentation(a["segmentation"], h, w, f"{src}: annotation {a['id']}")
            if a.get("iscrowd"):
                crowd |= m
            else:
                label[m] = 1
        label[crowd & (label == 0)] = 255
        rel = f"seg/{im['id']}.png"
        files[rel] = _png(label)
        records.append({"id": str(im["id"]), "image": im["file_name"], "label": rel})
    return {"task": "seg", "format_version": 1, "label_set": "person2", "records": records}, files


def _pick_layout(fmt: str, root: Path, images, labels) -> tuple[Path, Path]:
    if images is not None or labels is not None:
        if images is None or labels is None:
            raise DatasetError(f"data import {fmt}: give both --images and --labels, or neither")
        img, lab = (Path(p) if Path(p).is_absolute() else root / p for p in (images, labels))
        for p in (img, lab):
            if not p.is_dir():
                raise DatasetError(f"data import {fmt}: {p} is not a folder")
        return img, lab
    tried = PART_LAYOUTS[fmt][1]
    for img, lab in tried:
        if (root / img).is_dir() and (root / lab).is_dir():
            return root / img, root / lab
    shown = "; ".join(f"{a} + {b}" for a, b in tried)
    raise DatasetError(f"{root}: no {fmt} layout found (tried {shown}); pass --images and --labels")


def part_folder_manifest(fmt: str, root: Path, images=None, labels=None, labels_set=None):
    """(seg manifest, label-set entry) of a body-part PNG folder; see the module docstring."""
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder (data import {fmt} takes the dataset's root folder)")
    default = PART_LAYOUTS[fmt][0]
    spec = labels_set or default
    if spec is None:
        raise DatasetError(f"data import {fmt}: name the classes with --label-set (a built-in name or JSON)")
    try:
        ls = label_set(spec)
    except VocabError as e:
        raise DatasetError(f"data import {fmt}: {e}") from None
    entry = (
        ls.name
        if not str(spec).lower().endswith(".json")
        else {"name": ls.name, "ignore_index": ls.ignore_index, "classes": list(ls.names)}
    )
    img_dir, lab_dir = _pick_layout(fmt, root, images, labels)
    imgs: dict[str, Path] = {}
    for p in sorted(img_dir.iterdir()):
        if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file():
            if p.stem in imgs:
                raise DatasetError(
                    f"{img_dir}: two images with stem {p.stem!r} ({imgs[p.stem].name}, {p.name})"
                )
            imgs[p.stem] = p
    labs = sorted(p for p in lab_dir.iterdir() if p.suffix.lower() == ".png" and p.is_file())
    if not labs:
        raise DatasetError(f"{lab_dir}: no label PNG files")
    orphans = [p.name for p in labs if p.stem not in imgs]
    if orphans:
        raise DatasetError(f"{lab_dir}: {len(orphans)} label files have no image in {img_dir}: {orphans[:5]}")
    records = []
    for p in labs:
        arr = read_label(p, ls.num_classes, ls.ignore_index, what=f"{ls.name} label map")
        hw = _image_hw(str(imgs[p.stem]))
        if arr.shape != hw:
            raise DatasetError(f"{p}: label map is {arr.shape} (H, W), its image {imgs[p.stem].name} is {hw}")
        records.append({"id": p.stem, "image": str(imgs[p.stem].resolve()), "label": str(p.resolve())})
    manifest = {"task": "seg", "format_version": 1, "label_set": entry, "records": records,
                "unlabelled_images": len(imgs) - len(records)}  # fmt: skip
    return manifest, entry
