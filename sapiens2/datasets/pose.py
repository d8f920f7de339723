"""Top-down pose reader: COCO-style keypoint JSON + images, cropped with the UDP affine transform.

One sample per person annotation. The person box (x, y, w, h) becomes a centre and a scale
(box widened to the input aspect ratio, then multiplied by ``padding``), and the crop maps the
box onto the input grid with UDP's convention: the box's extent goes to [0, size - 1] pixels, so
pixel centres at integer coordinates map without a half-pixel shift.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage
from torch.utils.data import Dataset

from sapiens2.registry import DATASETS, TRANSFORMS
from sapiens2.utils_io import read_json
from sapiens2.vocab import WHOLEBODY_SPLIT_SIZES, KeypointSet, VocabError, keypoint_set
from sapiens2.vocab_match import keypoint_set_of_file

from .base import to_chw
from .io import DatasetError, read_rgb, where


def bbox_to_center_scale(bbox, aspect_wh: float, padding: float = 1.25) -> tuple[np.ndarray, np.ndarray]:
    """Centre and (w, h) scale of an xywh box, widened to ``aspect_wh`` = w / h and padded."""
    x, y, w, h = (float(v) for v in bbox)
    center = np.array([x + 0.5 * w, y + 0.5 * h])
    if w > aspect_wh * h:
        h = w / aspect_wh
    else:
        w = h * aspect_wh
    return center, np.array([w, h]) * padding


def udp_affine(center, scale, input_size: tuple[int, int]) -> np.ndarray:
    """2 x 3 UDP affine from image pixels to crop pixels (no rotation).

    Args:
        center: box centre (x, y) in image pixels.
        scale: box size (w, h) in image pixels.
        input_size: crop size (w, h).
    """
    sx = (input_size[0] - 1.0) / scale[0]
    sy = (input_size[1] - 1.0) / scale[1]
    return np.array(
        [[sx, 0.0, sx * (0.5 * scale[0] - center[0])], [0.0, sy, sy * (0.5 * scale[1] - center[1])]]
    )


def invert_affine(m: np.ndarray) -> np.ndarray:
    """Inverse of a 2 x 3 affine ``[A | t]``: ``[A^-1 | -A^-1 t]``, the 2 x 2 inverse in closed form
    (``np.linalg.inv`` costs milliseconds per call in its thread pool, once per crop)."""
    (a, b, t0), (c, d, t1) = np.asarray(m, dtype=np.float64)
    det = a * d - b * c
    if det == 0 or not np.isfinite(det):
        raise ValueError(f"affine {np.asarray(m).tolist()} is not invertible")
    ai = np.array([[d, -b], [-c, a]]) / det
    return np.hstack([ai, -(ai @ np.array([[t0], [t1]]))])


def apply_affine(points: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Apply a 2 x 3 affine to N x 2 points."""
    return points @ m[:, :2].T + m[:, 2]


def warp_image(img: np.ndarray, m: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    """Bilinear warp of an H x W x C float image by the affine ``m`` to ``input_size`` (w, h); 0 outside."""
    w, h = input_size
    inv = invert_affine(m)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    src_x = inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]
    src_y = inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]
    out = np.empty((h, w, img.shape[2]), dtype=np.float32)
    for c in range(img.shape[2]):
        out[..., c] = ndimage.map_coordinates(img[..., c], [src_y, src_x], order=1, mode="constant", cval=0.0)
    return out


@TRANSFORMS.register_module()
class TopdownAffineUDP:
    """Crop a sample's image and keypoints around ``bbox`` with the UDP affine.

    Works on a dict with ``img`` (H x W x 3 float), ``bbox`` (xywh) and optionally ``keypoints``
    (K x 2, image pixels); adds ``crop`` meta (center, scale, input_size, affine, inv_affine).

    Args:
        input_size: crop size (w, h); (768, 1024) as the official pose models.
        padding: box padding factor.
    """

    def __init__(self, input_size: tuple[int, int] = (768, 1024), padding: float = 1.25) -> None:
        self.input_size = (int(input_size[0]), int(input_size[1]))
        self.padding = float(padding)

    def __call__(self, results: dict) -> dict:
        center, scale = bbox_to_center_scale(
            results["bbox"], self.input_size[0] / self.input_size[1], self.padding
        )
        m = udp_affine(center, scale, self.input_size)
        results["img"] = warp_image(results["img"], m, self.input_size)
        if "keypoints" in results:
            results["keypoints"] = apply_affine(np.asarray(results["keypoints"], dtype=np.float64), m)
        results["crop"] = {
            "center": center,
            "scale": scale,
            "input_size": self.input_size,
            "affine": m,
            "inv_affine": invert_affine(m),
        }
        return results


_BOX_AREA = "w * h * 0.53 of the box (no 'area'; xtcocotools use_area=False)"


def _box_area(bbox) -> float:
    return float(bbox[2]) * float(bbox[3]) * 0.53


@DATASETS.register_module()
class PoseTopdownDataset(Dataset):
    """COCO-style keypoints (308 by default) read as top-down crops.

    Args:
        ann_file: COCO JSON with ``images``, ``annotations`` (``keypoints`` = K x (x, y, v) flat,
            ``bbox`` xywh) and ``categories``.
        data_root: folder the images' ``file_name`` are relative to (default: the JSON's folder).
        input_size: crop size (w, h); default (768, 1024), i.e. 1024 x 768 (H x W).
        padding: box padding factor (1.25).
        num_keypoints: expected K (default: the keypoint set's).
        skip_empty: drop crowd annotations and those with no labelled keypoint.
        check_files: check at construction that every image exists.
        keypoint_set: the vocabulary (name, JSON path or dict); default: the JSON's top-level
            ``keypoint_set`` (what ``data import`` writes), else the built-in set whose names its
            ``categories[].keypoints`` lists (:func:`sapiens2.vocab_match.keypoint_set_of_file`, never a
            set chosen by the count), else the 308 set (a file of another count is then an error
            asking to declare its set), or, with only ``num_keypoints``, a set of that many unnamed
            keypoints.

    ``area_source`` (also each sample's): where ``area`` comes from: the JSON's ``area_source`` (what
    ``data import`` writes), else its ``area`` fields, with ``w * h * 0.53`` of the box for an
    annotation without one (xtcocotools' ``use_area=False`` convention).

    Sample keys: ``index``, ``id`` (``"<image_id>_<ann_id>"``), ``image_id``, ``ann_id``, ``image``
    (3 x h x w crop, float32 [0, 1]), ``keypoints`` (K x 2, crop pixels), ``visibility`` (K,
    int64 COCO flags 0/1/2), ``keypoints_image`` (K x 2, image pixels), ``bbox`` (4, xywh image
    pixels), ``bbox_score``, ``area``, ``crop`` (center, scale, input_size, affine 2 x 3 image->crop,
    inv_affine crop->image), ``image_path``, ``orig_size`` (H, W), and ``head_size`` (MPII's head
    size, when annotations carry one).
    """

    task = "pose"

    def __init__(
        self,
        ann_file: str | os.PathLike,
        data_root=None,
        input_size: tuple[int, int] = (768, 1024),
        padding: float = 1.25,
        num_keypoints: int | None = None,
        skip_empty: bool = True,
        check_files: bool = True,
        keypoint_set: str | os.PathLike | dict | KeypointSet | None = None,
    ) -> None:
        self.ann_file = Path(ann_file)
        self.data_root = Path(data_root) if data_root is not None else self.ann_file.parent
        self.transform = TopdownAffineUDP(input_size, padding)
        self.input_size = self.transform.input_size
        coco = read_json(self.ann_file)
        if (
            not isinstance(coco, dict)
            or not isinstance(coco.get("images"), list)
            or not isinstance(coco.get("annotations"), list)
        ):
            raise DatasetError(f"{self.ann_file}: COCO JSON needs 'images' and 'annotations' lists")
        self.coco = coco
        declared = coco.get("keypoint_set")
        if keypoint_set is None and declared is None and num_keypoints is None:
            declared = self._listed_set(coco)
        self.keypoint_set = self._keypoint_set(keypoint_set, declared, num_keypoints)
        with_area = [isinstance(a, dict) and a.get("area") is not None for a in coco["annotations"]]
        self.area_source = str(coco.get("area_source") or (
            "the file's 'area'" if all(with_area) else _BOX_AREA if not any(with_area)
            else f"the file's 'area'; {_BOX_AREA} where an annotation has none"))
        self.num_keypoints = self.keypoint_set.num_keypoints
        self._hint = (
            ""
            if keypoint_set is not None or declared is not None
            else '; the JSON names no "keypoint_set" (sapiens2-bench data import writes one), so it is read '
            "as keypoints308: declare it or pass keypoint_set="
        )
        self.images = {}
        for im in coco["images"]:
            if "id" not in im or "file_name" not in im:
                raise DatasetError(
                    f"{where(self.ann_file, im.get('id'))}: image entry needs 'id' and 'file_name'"
                )
            self.images[im["id"]] = im
            if check_files and not self._image_path(im).is_file():
                raise DatasetError(
                    f"{where(self._image_path(im), 'image_id ' + str(im['id']))}: image file not found"
                )
        for cat in coco.get("categories", []):
            names = cat.get("keypoints")
            if names is not None and len(names) != self.num_keypoints:
                raise DatasetError(
                    f"{self.ann_file}: category {cat.get('id')} lists {len(names)} keypoint names, "
                    f"expected {self.num_keypoints} ({self.keypoint_set.name}){self._hint}"
                )
            if names is not None and not self._hint and not self.keypoint_set.name.startswith("unnamed"):
                try:
                    self.keypoint_set.check_names(names, f"{self.ann_file}: category {cat.get('id')}")
                except VocabError as e:
                    raise DatasetError(str(e)) from None
        self.anns = []
        for ann in coco["annotations"]:
            self._check_ann(ann)
            kps = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3)
            if skip_empty and (ann.get("iscrowd", 0) or not (kps[:, 2] > 0).any()):
                continue
            self.anns.append(ann)

    def _listed_set(self, coco: dict) -> KeypointSet | None:
        """The built-in set whose names the categories list (None: they list none)."""
        cats = [c for c in coco.get("categories") or [] if isinstance(c, dict)]
        listed = [c["keypoints"] for c in cats if isinstance(c.get("keypoints"), list)]
        names = next((n for n in listed if n), None)
        if names is None or any(f in a for a in coco["annotations"][:1] if isinstance(a, dict)
                                for f in WHOLEBODY_SPLIT_SIZES if f != "keypoints"):
            return None  # nothing listed, or COCO-WholeBody's layout (it lists its 17 body names only)
        try:
            return keypoint_set_of_file(names, None, str(self.ann_file))[0]
        except VocabError:
            return None  # names of no built-in set: the 308 default, whose count and names are then checked

    def _keypoint_set(self, given, declared, num_keypoints) -> KeypointSet:
        spec = given if given is not None else declared
        if isinstance(spec, str) and spec.lower().endswith(".json") and not Path(spec).is_absolute():
            spec = str(self.ann_file.parent / spec)
        if spec is None and num_keypoints is not None:
            ks = keypoint_set("keypoints308")
            if int(num_keypoints) == ks.num_keypoints:
                return ks
            k = int(num_keypoints)
            return KeypointSet(f"unnamed{k}", tuple(f"k{i}" for i in range(k)), np.full(k, 0.05))
        try:
            ks = keypoint_set(spec)
        except VocabError as e:
            raise DatasetError(f"{self.ann_file}: keypoint_set: {e}") from None
        if num_keypoints is not None and int(num_keypoints) != ks.num_keypoints:
            raise DatasetError(
                f"{self.ann_file}: num_keypoints={num_keypoints} disagrees with keypoint set {ks.name} "
                f"({ks.num_keypoints})"
            )
        return ks

    def _image_path(self, im: dict) -> Path:
        p = Path(im["file_name"])
        return p if p.is_absolute() else self.data_root / p

    def _check_ann(self, ann: dict) -> None:
        rec = f"annotation {ann.get('id')!r} of {self.ann_file}"
        for key in ("id", "image_id", "keypoints", "bbox"):
            if key not in ann:
                raise DatasetError(f"{rec}: missing {key!r}")
        split = [f for f in WHOLEBODY_SPLIT_SIZES if f != "keypoints" and f in ann]
        if split:
            raise DatasetError(
                f"{rec}: COCO-WholeBody split layout ({', '.join(split)} next to 'keypoints'): read as "
                f"{self.num_keypoints} keypoints it would ignore those parts; import it with "
                "`sapiens2-bench data import coco-wholebody SRC --out DIR`"
            )
        if ann["image_id"] not in self.images:
            raise DatasetError(f"{rec}: image_id {ann['image_id']!r} is not in 'images'")
        n = len(ann["keypoints"])
        if n != 3 * self.num_keypoints:
            raise DatasetError(
                f"{rec}: {n} keypoint values = {n / 3:g} keypoints, expected {self.num_keypoints} "
                f"(x, y, v triples){self._hint}"
            )
        bbox = ann["bbox"]
        if len(bbox) != 4 or not (float(bbox[2]) > 0 and float(bbox[3]) > 0):
            raise DatasetError(f"{rec}: bbox must be [x, y, w, h] with positive size, got {bbox!r}")

    def __len__(self) -> int:
        return len(self.anns)

    def __getitem__(self, index: int) -> dict:
        if not -len(self) <= index < len(self):
            raise IndexError(f"PoseTopdownDataset: index {index} out of range for {len(self)} samples")
        index = index % len(self)
        ann = self.anns[index]
        im = self.images[ann["image_id"]]
        path = self._image_path(im)
        rec = f"image_id {im['id']}, annotation {ann['id']}"
        img = read_rgb(path, rec)
        if "height" in im and "width" in im and (int(im["height"]), int(im["width"])) != img.shape[:2]:
            raise DatasetError(
                f"{where(path, rec)}: image is {img.shape[:2]} (H, W) but the JSON says "
                f"({im['height']}, {im['width']})"
            )
        kps = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3)
        res = self.transform(
            {"img": img.astype(np.float32) / 255.0, "bbox": ann["bbox"], "keypoints": kps[:, :2]}
        )
        crop = {
            k: (
                torch.as_tensor(np.asarray(v), dtype=torch.float64 if k.endswith("affine") else torch.float32)
                if k != "input_size"
                else tuple(v)
            )
            for k, v in res["crop"].items()
        }
        sample = {
            "index": index,
            "id": f"{im['id']}_{ann['id']}",
            "image_id": int(im["id"]) if isinstance(im["id"], int) else im["id"],
            "ann_id": int(ann["id"]) if isinstance(ann["id"], int) else ann["id"],
            "image": to_chw(res["img"]),
            "keypoints": torch.from_numpy(res["keypoints"].astype(np.float32)),
            "visibility": torch.from_numpy(kps[:, 2].astype(np.int64)),
            "keypoints_image": torch.from_numpy(kps[:, :2].astype(np.float32)),
            "bbox": torch.tensor([float(v) for v in ann["bbox"]], dtype=torch.float32),
            "bbox_score": float(ann.get("score", 1.0)),
            # no area: 0.53 x box, the convention of the sets without one (xtcocotools use_area=False)
            "area": float(ann["area"]) if ann.get("area") is not None else _box_area(ann["bbox"]),
            "area_source": self.area_source,
            "crop": crop,
            "image_path": str(path),
            "orig_size": (int(img.shape[0]), int(img.shape[1])),
        }
        if "head_size" in ann:
            sample["head_size"] = float(ann["head_size"])
        return sample
