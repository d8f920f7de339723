"""File readers with validation: every error names the file and the manifest record.

Formats: images (any PIL format, RGB), 8-bit label PNGs, masks (PNG, non-zero = valid, or
``.npy`` bool), ``.npy`` float arrays, 16-bit RGB PNG normals, 8/16-bit albedo PNGs and
OpenEXR (through OpenCV when its EXR codec is enabled; see :func:`exr_supported`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np


class DatasetError(ValueError):
    """Bad dataset input; the message names the file and the record."""


def where(path, record) -> str:
    """A location string ``path (record ...)`` for error messages."""
    rec = "" if record is None else f" (record {record})"
    return f"{path}{rec}"


def _check_file(path: Path, record) -> None:
    if not path.is_file():
        raise DatasetError(f"{where(path, record)}: file not found")


def read_rgb(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read an image as H x W x 3 uint8 RGB."""
    from PIL import Image

    path = Path(path)
    _check_file(path, record)
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except Exception as e:  # PIL raises several types for corrupt files
        raise DatasetError(f"{where(path, record)}: unreadable image ({e})") from e


def _read_png_raw(path: Path, record) -> np.ndarray:
    """Read a PNG keeping its bit depth and palette indices (16-bit RGB needs OpenCV or imageio)."""
    from PIL import Image

    _check_file(path, record)
    with open(path, "rb") as f:
        head = f.read(26)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or len(head) < 26:
        raise DatasetError(f"{where(path, record)}: not a PNG file")
    depth16, colour_type = head[24] == 16, head[25]
    if depth16 and colour_type != 0:  # 16-bit RGB(A): PIL would reduce it to 8 bits
        return _read_16bit_rgb(path, record)
    try:
        with Image.open(path) as im:
            arr = np.asarray(im.convert("L") if im.mode == "1" else im)
    except Exception as e:  # PIL raises several types for corrupt files
        raise DatasetError(f"{where(path, record)}: unreadable image ({e})") from e
    return arr.astype(np.uint16) if depth16 else arr


def _read_16bit_rgb(path: Path, record) -> np.ndarray:
    try:
        import cv2
    except ImportError:
        cv2 = None
    if cv2 is not None:
        arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        if arr is None:
            raise DatasetError(f"{where(path, record)}: unreadable image")
        return arr[..., ::-1][..., -3:] if arr.ndim == 3 else arr
    try:
        import imageio.v3 as iio
    except ImportError as e:
        raise DatasetError(
            f"{where(path, record)}: 16-bit RGB PNG needs opencv-python-headless or imageio"
        ) from e
    return np.asarray(iio.imread(path))


def read_label(path: str | os.PathLike, num_classes: int, ignore_index: int, record=None) -> np.ndarray:
    """Read a single-channel label PNG (class ids, ``ignore_index`` = ignored) as H x W int64."""
    path = Path(path)
    arr = _read_png_raw(path, record) if path.suffix.lower() == ".png" else read_npy(path, record)
    if arr.ndim != 2:
        raise DatasetError(f"{where(path, record)}: label map must be single-channel, got shape {arr.shape}")
    arr = arr.astype(np.int64)
    bad = (arr >= num_classes) & (arr != ignore_index) | (arr < 0)
    if bad.any():
        vals = sorted(set(np.unique(arr[bad]).tolist()))[:10]
        raise DatasetError(
            f"{where(path, record)}: label values {vals} outside 0..{num_classes - 1} "
            f"and ignore {ignore_index}"
        )
    return arr


def read_mask(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a mask (PNG: non-zero = valid; ``.npy``: bool or 0/1) as H x W bool."""
    path = Path(path)
    arr = read_npy(path, record) if path.suffix.lower() == ".npy" else _read_png_raw(path, record)
    if arr.ndim == 3:
        arr = arr[..., 0]
    if arr.ndim != 2:
        raise DatasetError(f"{where(path, record)}: mask must be H x W, got shape {arr.shape}")
    return arr > 0


def read_npy(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a ``.npy`` array (``allow_pickle=False``)."""
    path = Path(path)
    _check_file(path, record)
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise DatasetError(f"{where(path, record)}: unreadable .npy ({e})") from e


def exr_supported() -> bool:
    """True when OpenCV is installed with its OpenEXR codec (enabled via OPENCV_IO_ENABLE_OPENEXR)."""
    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    try:
        import cv2
    except ImportError:
        return False
    return "OpenEXR" in cv2.getBuildInformation() and os.environ.get("OPENCV_IO_ENABLE_OPENEXR") == "1"


def read_exr(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a 3-channel float OpenEXR file as H x W x 3 float32 in file channel order R, G, B."""
    path = Path(path)
    _check_file(path, record)
    if not exr_supported():
        raise DatasetError(f"{where(path, record)}: reading .exr needs opencv-python-headless with OpenEXR")
    import cv2

    arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise DatasetError(f"{where(path, record)}: unreadable .exr")
    return arr[..., ::-1].astype(np.float32) if arr.ndim == 3 else arr.astype(np.float32)


def read_vector_map(path: str | os.PathLike, record=None, png16_range: tuple[float, float] = (-1.0, 1.0)):
    """Read an H x W x 3 float map from .npy, .exr or 16-bit PNG (``v / 65535`` mapped to a range)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        arr = read_npy(path, record)
    elif suffix == ".exr":
        arr = read_exr(path, record)
    elif suffix == ".png":
        raw = _read_png_raw(path, record)
        if raw.dtype != np.uint16:
            raise DatasetError(f"{where(path, record)}: expected a 16-bit PNG, got {raw.dtype}")
        lo, hi = png16_range
        arr = raw.astype(np.float32) / 65535.0 * (hi - lo) + lo
    else:
        raise DatasetError(
            f"{where(path, record)}: unsupported format {suffix!r} (use .npy, .exr or 16-bit .png)"
        )
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise DatasetError(f"{where(path, record)}: expected H x W x 3, got shape {arr.shape}")
    return arr.astype(np.float32)


def read_albedo(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read an albedo map (8- or 16-bit PNG, or ``.npy``/``.exr`` floats) as H x W x 3 float32 in [0, 1]."""
    path = Path(path)
    if path.suffix.lower() in (".npy", ".exr"):
        arr = read_vector_map(path, record)
    else:
        raw = _read_png_raw(path, record) if path.suffix.lower() == ".png" else read_rgb(path, record)
        if raw.ndim == 2:
            raw = np.repeat(raw[..., None], 3, axis=2)
        if raw.ndim != 3 or raw.shape[2] < 3:
            raise DatasetError(f"{where(path, record)}: expected an RGB albedo, got shape {raw.shape}")
        scale = 65535.0 if raw.dtype == np.uint16 else 255.0
        arr = raw[..., :3].astype(np.float32) / scale
    return arr


def check_same_size(ref_shape, other_shape, path, record, what: str) -> None:
    """Raise unless the first two dims of ``other_shape`` equal the image's (H, W)."""
    if tuple(ref_shape[:2]) != tuple(other_shape[:2]):
        raise DatasetError(
            f"{where(path, record)}: {what} size {tuple(other_shape[:2])} differs from the image size "
            f"{tuple(ref_shape[:2])} (H, W)"
        )
