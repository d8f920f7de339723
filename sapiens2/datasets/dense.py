"""Readers of the dense tasks: body-part segmentation, normals, pointmaps and albedo.

Each reads a manifest (see ``README.md`` in this folder) and returns sample dicts at the images'
native size; evaluators resize predictions to the ground truth, as the official ones do.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from sapiens2.reference import seg_classes29
from sapiens2.registry import DATASETS
from sapiens2.utils_io import read_json
from sapiens2.vocab import LabelSet, VocabError, label_set, label_sets

from .base import ManifestDataset, to_chw
from .io import DatasetError, check_same_size, read_label, read_map, read_mask, read_npy, where

CANONICAL_FOCAL_LENGTH = 768.0


@DATASETS.register_module()
class SegDataset(ManifestDataset):
    """Image + single-channel label PNG in the classes of a label set (Sapiens2's 29 by default).

    The label set is ``label_set=`` or the manifest's ``"label_set"`` (a built-in name such as
    ``lip20``, a JSON path relative to the manifest, or an inline list of class names); a manifest
    that names none is read as Sapiens2's 29 classes, and a value outside them is an error that
    says so. Sample keys: ``index``, ``id``, ``image`` (3 x H x W float32 in [0, 1]), ``label``
    (H x W int64), ``image_path``, ``orig_size``.

    Args:
        ann_file: manifest JSON (records: ``id``, ``image``, ``label``).
        data_root: folder the record paths are relative to (default: the manifest's folder).
        num_classes: number of classes (default: the label set's); must agree with the label set.
        ignore_index: label value that is ignored (default: the label set's, 255).
        label_set: overrides the manifest's label set (must then agree with it).
    """

    task = "seg"
    file_keys = ("label",)

    def __init__(
        self,
        ann_file: str | os.PathLike,
        data_root=None,
        num_classes: int | None = None,
        ignore_index: int | None = None,
        check_files: bool = True,
        label_set=None,
    ) -> None:
        super().__init__(ann_file, data_root, check_files)
        declared = read_json(self.ann_file).get("label_set")
        self.label_set_declared = declared is not None or label_set is not None
        ls = self._label_set(label_set, declared, num_classes)
        self.label_set = ls
        self.num_classes = ls.num_classes
        self.ignore_index = int(ignore_index if ignore_index is not None else ls.ignore_index)
        self.class_names = list(ls.names) if ls.name != "custom_count" else None

    def _label_set(self, given, declared, num_classes):
        try:
            if declared is not None and isinstance(declared, str) and declared.lower().endswith(".json"):
                p = Path(declared)
                declared = str(p if p.is_absolute() else self.ann_file.parent / p)
            mine = label_set(declared) if declared is not None else None
            ls = label_set(given) if given is not None else mine
        except VocabError as e:
            raise DatasetError(f"{self.ann_file}: label_set: {e}") from None
        if mine is not None and given is not None and mine.names != ls.names:
            raise DatasetError(
                f"{self.ann_file}: the manifest's label set {mine.name} ({mine.num_classes} classes) "
                f"disagrees with label_set={ls.name} ({ls.num_classes})"
            )
        if ls is None:
            ref = seg_classes29()
            if num_classes is None or int(num_classes) == ref["num_classes"]:
                return label_set("sapiens2_29")
            return LabelSet("custom_count", tuple(str(i) for i in range(int(num_classes))))
        if num_classes is not None and int(num_classes) != ls.num_classes:
            raise DatasetError(
                f"{self.ann_file}: num_classes={num_classes} disagrees with label set {ls.name} "
                f"({ls.num_classes} classes)"
            )
        return ls

    def __getitem__(self, index: int) -> dict:
        rec, sample, img = self._base_sample(index)
        path = self.path(rec, "label")
        try:
            label = read_label(path, self.num_classes, self.ignore_index, self._rec(rec))
        except DatasetError as e:
            if self.label_set_declared or "outside" not in str(e):
                raise
            raise DatasetError(
                f"{e}; the manifest names no label_set, so labels are read as Sapiens2's 29 classes: add "
                f'"label_set": NAME (built in: {label_sets()}) or a JSON file to the manifest'
            ) from None
        check_same_size(img.shape, label.shape, path, self._rec(rec), "label map")
        sample["label"] = torch.from_numpy(label)
        return sample


class _MaskedDataset(ManifestDataset):
    """Shared mask handling: ``mask`` file if given, else derived by the subclass."""

    optional_file_keys = ("mask",)

    def _mask(self, rec: dict, img: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        if "mask" not in rec:
            return fallback
        path = self.path(rec, "mask")
        mask = read_mask(path, self._rec(rec))
        check_same_size(img.shape, mask.shape, path, self._rec(rec), "mask")
        return mask


@DATASETS.register_module()
class NormalDataset(_MaskedDataset):
    """Image + camera-frame surface normals + mask.

    Normals: ``.npy`` (H x W x 3 float), ``.exr`` (3 channels R, G, B = x, y, z) or 8/16-bit RGB
    PNG (``n = v / vmax * 2 - 1``; formats in ``README.md``). Without a ``mask`` entry the mask is
    the pixels with a finite normal of length > 0.5. Normals are re-normalised inside the mask and
    zero outside.

    Sample keys: ``index``, ``id``, ``image``, ``normal`` (3 x H x W float32), ``mask`` (H x W bool).
    """

    task = "normal"
    file_keys = ("normal",)

    def __getitem__(self, index: int) -> dict:
        rec, sample, img = self._base_sample(index)
        path = self.path(rec, "normal")
        normal = read_map(path, "normal", self._rec(rec))
        check_same_size(img.shape, normal.shape, path, self._rec(rec), "normal map")
        finite = np.isfinite(normal).all(axis=2)
        length = np.linalg.norm(np.where(finite[..., None], normal, 0), axis=2)
        mask = self._mask(rec, img, finite & (length > 0.5))
        bad = mask & ~(finite & (length > 1e-6))
        if bad.any():
            raise DatasetError(
                f"{where(path, self._rec(rec))}: {int(bad.sum())} masked pixels have no valid normal"
            )
        normal = np.where(mask[..., None], normal / np.maximum(length, 1e-12)[..., None], 0.0)
        sample["normal"] = to_chw(normal)
        sample["mask"] = torch.from_numpy(mask)
        return sample


def parse_intrinsics(value, where_: str) -> np.ndarray:
    """A 3 x 3 intrinsics matrix from a nested list, or ``[fx, fy, cx, cy]``."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape == (4,):
        fx, fy, cx, cy = arr
        arr = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
    if arr.shape != (3, 3) or not np.isfinite(arr).all() or arr[0, 0] <= 0 or arr[1, 1] <= 0:
        raise DatasetError(
            f"{where_}: intrinsics must be 3 x 3 (or fx, fy, cx, cy) with positive focal, got {value!r}"
        )
    return arr


@DATASETS.register_module()
class PointmapDataset(_MaskedDataset):
    """Image + camera-frame pointmap (metres) + mask + intrinsics.

    The record's ``K`` is a 3 x 3 list, ``[fx, fy, cx, cy]`` or the path of a ``.npy``/``.json``
    holding one. As in the official pipeline, the canonical pointmap is the metric one scaled
    isotropically by ``canonical_focal_length / fx`` (768 by default).

    Sample keys: ``index``, ``id``, ``image``, ``pointmap`` (3 x H x W float32, metres),
    ``pointmap_canonical`` (3 x H x W), ``canonical_scale`` (float, 768 / fx), ``mask``, ``K`` (3 x 3).
    """

    task = "pointmap"
    file_keys = ("pointmap", "K")

    def __init__(
        self,
        ann_file,
        data_root=None,
        canonical_focal_length: float = CANONICAL_FOCAL_LENGTH,
        check_files: bool = True,
    ) -> None:
        super().__init__(ann_file, data_root, check_files)
        self.canonical_focal_length = float(canonical_focal_length)

    def _intrinsics(self, rec: dict) -> np.ndarray:
        value = rec["K"]
        if isinstance(value, str):
            path = self.path(rec, "K")
            if path.suffix.lower() == ".json":
                value = read_json(path)
            else:
                value = read_npy(path, self._rec(rec))
            return parse_intrinsics(value, where(path, self._rec(rec)))
        return parse_intrinsics(value, where(self.ann_file, self._rec(rec)))

    def __getitem__(self, index: int) -> dict:
        rec, sample, img = self._base_sample(index)
        path = self.path(rec, "pointmap")
        pts = read_map(path, "float", self._rec(rec))
        check_same_size(img.shape, pts.shape, path, self._rec(rec), "pointmap")
        finite = np.isfinite(pts).all(axis=2)
        mask = self._mask(rec, img, finite & (pts[..., 2] > 0))
        if (mask & ~finite).any():
            raise DatasetError(f"{where(path, self._rec(rec))}: non-finite points inside the mask")
        pts = np.where(mask[..., None], pts, 0.0)
        K = self._intrinsics(rec)
        scale = self.canonical_focal_length / K[0, 0]
        sample["pointmap"] = to_chw(pts)
        sample["pointmap_canonical"] = to_chw(pts * scale)
        sample["canonical_scale"] = float(scale)
        sample["mask"] = torch.from_numpy(mask)
        sample["K"] = torch.from_numpy(K.astype(np.float32))
        return sample


@DATASETS.register_module()
class AlbedoDataset(_MaskedDataset):
    """Image + albedo (8/16-bit PNG or float ``.npy``/``.exr``) + mask; albedo in [0, 1].

    Sample keys: ``index``, ``id``, ``image``, ``albedo`` (3 x H x W float32), ``mask`` (H x W bool;
    all pixels when the record has no mask).
    """

    task = "albedo"
    file_keys = ("albedo",)

    def __getitem__(self, index: int) -> dict:
        rec, sample, img = self._base_sample(index)
        path = self.path(rec, "albedo")
        albedo = read_map(path, "unit", self._rec(rec))
        check_same_size(img.shape, albedo.shape, path, self._rec(rec), "albedo")
        if not np.isfinite(albedo).all() or albedo.min() < -1e-6 or albedo.max() > 1 + 1e-6:
            raise DatasetError(f"{where(path, self._rec(rec))}: albedo values outside [0, 1]")
        mask = self._mask(rec, img, np.ones(img.shape[:2], dtype=bool))
        sample["albedo"] = to_chw(albedo)
        sample["mask"] = torch.from_numpy(mask)
        return sample
