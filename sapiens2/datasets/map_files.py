"""Label maps, masks and 3-channel maps (normals, albedo, pointmaps): the value rules of each format
on top of the file decoders of :mod:`sapiens2.datasets.decoders` (:mod:`sapiens2.datasets.io` re-exports
both),
and the pairing of prediction, GT and mask files by stem (``sapiens2-bench eval``).

The rules are those of ``sapiens2/datasets/README.md`` ("File formats"), summarised in
:mod:`sapiens2.datasets.io`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sapiens2.datasets.decoders import read_exr, read_npy, read_png, read_rgb
from sapiens2.errors import DatasetError, where

MAP_SUFFIXES = (".npy", ".png", ".exr")
_KIND_NAMES = {"normal": "normal", "unit": "albedo", "float": "pointmap"}
_RANGE_TOL = 1e-3


def _grey(arr: np.ndarray, path: Path, record, what: str) -> np.ndarray:
    """H x W from H x W, 1 x H x W, or H x W x C whose colour channels are equal (alpha ignored)."""
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    elif arr.ndim == 3 and arr.shape[-1] in (1, 2, 3, 4):
        colour = arr[..., : 1 if arr.shape[-1] <= 2 else 3]
        if not (colour == colour[..., :1]).all():
            raise DatasetError(
                f"{where(path, record)}: {what} must be single-channel (or grey saved as RGB), "
                "got a colour image"
            )
        arr = arr[..., 0]
    if arr.ndim != 2:
        raise DatasetError(f"{where(path, record)}: {what} must be H x W, got shape {arr.shape}")
    return arr


def _read_any(path: Path, record, what: str) -> np.ndarray:
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return read_npy(path, record)
    if suffix == ".png":
        return read_png(path, record)
    if suffix == ".exr":
        return read_exr(path, record)
    raise DatasetError(
        f"{where(path, record)}: unsupported {what} format {suffix!r}; expected .npy, .png or .exr"
    )


def read_label(path: str | os.PathLike, num_classes: int | None = None, ignore_index: int | None = None,
               record=None, what: str = "label map") -> np.ndarray:
    """Read an integer label map (PNG 8/16-bit or palette indices, or integer ``.npy``) as H x W int64.

    Args:
        path: the file.
        num_classes: when given, values must be in ``0..num_classes - 1`` or ``ignore_index``.
        ignore_index: the ignored label value.
        record: manifest record for error messages.
        what: name used in error messages.
    """
    path = Path(path)
    arr = _grey(_read_any(path, record, what), path, record, what)
    if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool):
        raise DatasetError(f"{where(path, record)}: {what} must hold integer labels, got {arr.dtype}")
    arr = arr.astype(np.int64)
    if num_classes is not None:
        bad = ((arr >= num_classes) & (arr != ignore_index)) | (arr < 0)
        if bad.any():
            vals = sorted(set(np.unique(arr[bad]).tolist()))[:10]
            raise DatasetError(
                f"{where(path, record)}: label values {vals} outside 0..{num_classes - 1} "
                f"and ignore {ignore_index}"
            )
    return arr


def read_seg_prediction(path: str | os.PathLike, num_classes: int | None = None,
                        ignore_index: int | None = None, record=None) -> tuple[np.ndarray, bool]:
    """Read a seg prediction: float ``.npy`` logits C x h x w, or a label map (PNG / integer ``.npy``).

    Returns:
        (array, is_labels): float32 logits or int64 H x W labels.
    """
    path = Path(path)
    if path.suffix.lower() == ".npy":
        arr = read_npy(path, record)
        if np.issubdtype(arr.dtype, np.floating):
            if arr.ndim != 3:
                raise DatasetError(f"{where(path, record)}: seg logits must be C x h x w, got {arr.shape}")
            if num_classes is not None and arr.shape[0] != num_classes:
                raise DatasetError(
                    f"{where(path, record)}: logits have {arr.shape[0]} channels, expected {num_classes}"
                )
            return arr.astype(np.float32), False
    labels = read_label(path, num_classes, ignore_index, record, "seg prediction")
    if num_classes is not None and ignore_index is not None and not 0 <= ignore_index < num_classes:
        hit = labels == ignore_index  # the GT's "not scored" value: no class a model can predict
        if hit.any():
            r, c = (int(v) for v in np.argwhere(hit)[0])
            raise DatasetError(
                f"{where(path, record)}: seg prediction holds the value {ignore_index} (the GT's ignore "
                f"index) at {int(hit.sum())} pixel(s), first at row {r}, column {c}; a prediction must name "
                f"a class 0..{num_classes - 1} at every pixel"
            )
    return labels, True


def read_mask(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a mask as H x W bool: PNG non-zero = valid; ``.npy`` bool or 0/1 values (else an error)."""
    path = Path(path)
    arr = _grey(_read_any(path, record, "mask"), path, record, "mask")
    if arr.dtype == bool:
        return arr
    if path.suffix.lower() == ".npy" and not np.isin(arr, (0, 1)).all():
        vals = sorted(set(np.unique(arr[~np.isin(arr, (0, 1))]).tolist()))[:5]
        raise DatasetError(
            f"{where(path, record)}: a .npy mask must be bool or hold only 0 and 1, found {vals} "
            "(threshold it yourself)"
        )
    return arr > 0


def _hwc(arr: np.ndarray, path: Path, record, what: str) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[-1] == 3:
        return arr
    if arr.ndim == 3 and arr.shape[0] == 3:
        return np.moveaxis(arr, 0, -1)
    raise DatasetError(f"{where(path, record)}: {what} must be H x W x 3 or 3 x H x W, got shape {arr.shape}")


def _png_scale(arr: np.ndarray, path: Path, record, png_max: int | None) -> float:
    """The full-scale value of an integer map: ``png_max`` when given, else 255 or 65535 by bit depth.

    Raises:
        DatasetError: a 16-bit file whose values all fit in 8 bits (most likely 8-bit values saved
            with 16 bits: read by depth they would be 256 times too dark), unless ``png_max`` says the scale.
    """
    if png_max is not None:
        if int(png_max) <= 0 or arr.max(initial=0) > int(png_max):
            raise DatasetError(f"{where(path, record)}: png_max {png_max} is not the full scale of this "
                               f"file (its maximum is {int(arr.max(initial=0))})")
        return float(png_max)
    if arr.dtype == np.uint16 and arr.max(initial=0) <= 255:
        raise DatasetError(
            f"{where(path, record)}: a 16-bit PNG whose values are all <= 255 (maximum "
            f"{int(arr.max(initial=0))}): most likely 8-bit values saved in a 16-bit file, which read by "
            "bit depth would be divided by 65535; re-save it as 8-bit or say the scale (eval --png-max 255 "
            "or 65535)")
    return 65535.0 if arr.dtype == np.uint16 else 255.0


def read_map(path: str | os.PathLike, kind: str, record=None, check_range: bool = True,
             png_max: int | None = None) -> np.ndarray:
    """Read a 3-channel map (normals, albedo, pointmap) as H x W x 3 float32.

    Args:
        path: ``.npy`` (float, H x W x 3 or 3 x H x W), ``.exr`` (float RGB), ``.png`` (8/16-bit RGB;
            grey albedo is repeated), or another 8-bit image format for albedo.
        kind: ``"normal"`` (PNG ``v / vmax * 2 - 1``), ``"unit"`` (albedo: PNG ``v / vmax``; values
            must be in [0, 1]) or ``"float"`` (pointmaps: real units, floats only).
        record: manifest record for error messages.
        check_range: check the albedo range here (:func:`check_pair_range` checks a prediction
            and its GT together, naming both files).
        png_max: the full-scale value of an integer image (default: 255 or 65535 by bit depth; a
            16-bit PNG whose values all fit in 8 bits is then an error).

    Raises:
        DatasetError: unreadable file, wrong shape, an integer ``.npy``, a PNG pointmap, or albedo
            values outside [0, 1].
    """
    if kind not in _KIND_NAMES:
        raise ValueError(f"read_map: kind {kind!r} not in {sorted(_KIND_NAMES)}")
    path = Path(path)
    what = _KIND_NAMES[kind]
    suffix = path.suffix.lower()
    if suffix in (".npy", ".exr"):
        arr = read_npy(path, record) if suffix == ".npy" else read_exr(path, record)
        if not np.issubdtype(arr.dtype, np.floating):
            rule = {"normal": "floats", "unit": "floats in [0, 1]", "float": "floats in real units"}[kind]
            raise DatasetError(
                f"{where(path, record)}: {'an' if what[0] == 'a' else 'a'} {what} {suffix} must hold {rule}, "
                f"got {arr.dtype} (values are never rescaled; save floats, or a PNG whose bit depth sets "
                "the scale)"
            )
    elif kind == "float":
        raise DatasetError(
            f"{where(path, record)}: a pointmap must be a float .npy or .exr (real units), not {suffix}"
        )
    else:
        arr = read_png(path, record) if suffix == ".png" else read_rgb(path, record)
        if arr.ndim == 2 and kind == "unit":
            arr = np.repeat(arr[..., None], 3, axis=2)
        if arr.ndim == 3 and arr.shape[-1] == 4:
            arr = arr[..., :3]
        if not np.issubdtype(arr.dtype, np.integer):
            raise DatasetError(f"{where(path, record)}: {what} PNG must be 8- or 16-bit, got {arr.dtype}")
        arr = arr.astype(np.float32) / _png_scale(arr, path, record, png_max)
        if kind == "normal":
            arr = arr * 2.0 - 1.0
    arr = _hwc(np.asarray(arr), path, record, f"{what} map")
    if kind == "unit" and check_range:
        lo, hi = value_range(arr)
        if not _in_unit_range(lo, hi):
            raise DatasetError(
                f"{where(path, record)}: albedo values span [{lo:.4g}, {hi:.4g}], outside [0, 1] "
                "(.npy/.exr albedo is taken as is: save floats in [0, 1], or an 8/16-bit PNG)"
            )
    return arr.astype(np.float32)


def _in_unit_range(lo: float, hi: float) -> bool:
    return lo >= -_RANGE_TOL and hi <= 1 + _RANGE_TOL


def check_pair_range(kind: str, pred: np.ndarray, pred_path, gt: np.ndarray, gt_path) -> None:
    """Raise when a prediction and its GT are not both in the value range of ``kind``.

    Only albedo (``"unit"``) has a fixed range, [0, 1]; normals are directions (the evaluator
    normalises them) and pointmaps are in real units. The message names both files and their ranges,
    so a 0..255 file next to a 0..1 file is found at once.
    """
    if kind != "unit":
        return
    (plo, phi), (glo, ghi) = value_range(pred), value_range(gt)
    if not (_in_unit_range(plo, phi) and _in_unit_range(glo, ghi)):
        raise DatasetError(
            f"albedo value ranges disagree: prediction {pred_path} spans [{plo:.4g}, {phi:.4g}], GT "
            f"{gt_path} spans [{glo:.4g}, {ghi:.4g}]; both must be in [0, 1] (.npy/.exr floats are taken "
            "as is, 8/16-bit PNGs are divided by 255/65535)"
        )


def value_range(arr: np.ndarray) -> tuple[float, float]:
    """(min, max) over the finite values (0, 0 when there are none)."""
    finite = arr[np.isfinite(arr)]
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)


def check_same_size(ref_shape, other_shape, path, record, what: str) -> None:
    """Raise unless the first two dims of ``other_shape`` equal the image's (H, W)."""
    if tuple(ref_shape[:2]) != tuple(other_shape[:2]):
        raise DatasetError(
            f"{where(path, record)}: {what} size {tuple(other_shape[:2])} differs from the image size "
            f"{tuple(ref_shape[:2])} (H, W)"
        )


def pair_files(pred_dir, gt_dir, mask_dir=None, suffixes: tuple[str, ...] = MAP_SUFFIXES
               ) -> list[tuple[str, Path, Path, Path | None]]:
    """Match prediction, GT (and mask) files by stem: ``gt/0001.png`` goes with ``pred/0001.npy``.

    Args:
        pred_dir: folder of predictions.
        gt_dir: folder of ground truth.
        mask_dir: optional folder of masks.
        suffixes: the file suffixes considered.

    Returns:
        ``(stem, pred_path, gt_path, mask_path)`` sorted by stem.

    Raises:
        DatasetError: a folder is missing or empty, two files share a stem, or a GT file has no
            prediction (or mask).
    """

    def index(d, what: str) -> dict[str, Path]:
        d = Path(d)
        if not d.is_dir():
            raise DatasetError(f"{d}: {what} folder not found")
        files: dict[str, Path] = {}
        for p in sorted(d.iterdir()):
            if p.is_file() and p.suffix.lower() in suffixes:
                if p.stem in files:
                    raise DatasetError(f"{d}: two {what} files share the stem {p.stem!r}")
                files[p.stem] = p
        if not files:
            raise DatasetError(f"{d}: no {what} files ({', '.join(suffixes)})")
        return files

    gts = index(gt_dir, "GT")
    preds = index(pred_dir, "prediction")
    masks = index(mask_dir, "mask") if mask_dir is not None else None
    missing = sorted(set(gts) - set(preds))
    if missing:
        raise DatasetError(
            f"{pred_dir}: no prediction for GT file(s) {missing[:5]}"
            + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else "")
        )
    if masks is not None:
        missing = sorted(set(gts) - set(masks))
        if missing:
            raise DatasetError(f"{mask_dir}: no mask for GT file(s) {missing[:5]}")
    return [(s, preds[s], gts[s], masks[s] if masks is not None else None) for s in sorted(gts)]
