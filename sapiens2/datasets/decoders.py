"""The file decoders under every reader: ``.npy`` (header checked first), images (upright, size checked
before decoding), 16-bit PNGs and OpenEXR; the value rules of each map kind are in
:mod:`sapiens2.datasets.map_files`, and :mod:`sapiens2.datasets.io` is the one import path of both.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(d / "a.npy", np.zeros((3, 4), np.float32))
    >>> read_npy(d / "a.npy").shape
    (3, 4)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sapiens2.datasets.image_size import check_image_size, open_image
from sapiens2.errors import DatasetError, where
from sapiens2.memory import available_memory_for, format_bytes


def _check_file(path: Path, record, what: str = "") -> None:
    if not path.is_file():
        raise DatasetError(f"{where(path, record)}: {what + ' ' if what else ''}file not found")


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n} bytes"


def read_npy(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a ``.npy`` array (``allow_pickle=False``), checking its header against the file size first.

    A zero-byte file, a bad header, an object dtype, or a header that declares more data than the
    file holds (a truncated file, or a tiny file asking for gigabytes) is a :class:`DatasetError`
    naming the file, raised before any array is allocated.
    """
    path = Path(path)
    _check_file(path, record)
    size = path.stat().st_size
    if size == 0:
        raise DatasetError(f"{where(path, record)}: unreadable .npy (empty file, 0 bytes)")
    fmt = np.lib.format
    try:
        with open(path, "rb") as f:
            version = fmt.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = fmt.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = fmt.read_array_header_2_0(f)
            else:
                shape, _, dtype = fmt._read_array_header(f, version)
            offset = f.tell()
    except Exception as e:  # NumPy raises ValueError/OSError/SyntaxError for bad headers
        raise DatasetError(f"{where(path, record)}: unreadable .npy ({e})") from e
    if dtype.hasobject:
        raise DatasetError(f"{where(path, record)}: unreadable .npy (object arrays are refused)")
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if offset + need > size:
        raise DatasetError(
            f"{where(path, record)}: unreadable .npy (header declares shape {tuple(shape)} {dtype} = "
            f"{_gib(need)}, but the file holds {_gib(size - offset)} after the header: truncated or corrupt)"
        )
    free = available_memory_for(need)
    if free is not None and need > free:
        raise DatasetError(f"{where(path, record)}: .npy of shape {tuple(shape)} {dtype} needs "
                           f"{format_bytes(need)}, but only {format_bytes(free)} of memory is available")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:
        raise DatasetError(f"{where(path, record)}: unreadable .npy ({e})") from e


def _upright(im):
    """``im`` in its displayed frame: the EXIF Orientation tag applied (as ``cv2.imread`` does)."""
    from PIL import ImageOps

    return ImageOps.exif_transpose(im)


def read_rgb(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read an image as H x W x 3 uint8 RGB, upright (its EXIF Orientation applied)."""
    path = Path(path)
    _check_file(path, record)
    try:
        with open_image(path, record, 3) as im:
            return np.asarray(_upright(im).convert("RGB"))
    except DatasetError:
        raise
    except Exception as e:  # PIL raises several types for corrupt files
        raise DatasetError(f"{where(path, record)}: unreadable image ({e})") from e


def read_png(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a PNG keeping its bit depth and palette indices: H x W or H x W x C (RGB order)."""
    path = Path(path)
    _check_file(path, record)
    with open(path, "rb") as f:
        head = f.read(26)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or len(head) < 26:
        raise DatasetError(f"{where(path, record)}: unreadable image (not a PNG file)")
    depth16, colour_type = head[24] == 16, head[25]
    channels = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}.get(colour_type, 4)
    check_image_size(int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"), channels,
                     2 if depth16 else 1, path, record)
    if depth16 and colour_type != 0:  # 16-bit RGB(A): PIL would reduce it to 8 bits
        return _read_16bit_rgb(path, record)
    try:
        with open_image(path, record) as im:
            im = _upright(im)
            arr = np.asarray(im.convert("L") if im.mode == "1" else im)
    except DatasetError:
        raise
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
            f"{where(path, record)}: 16-bit RGB PNG needs opencv-python or imageio"
        ) from e
    return np.asarray(iio.imread(path))


def exr_supported() -> bool:
    """True when OpenCV is built with its OpenEXR codec (enabled via OPENCV_IO_ENABLE_OPENEXR).

    OpenCV 5 wheels list ``OpenEXR: NO`` in their build information: the word alone is not enough.
    """
    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    try:
        import cv2
    except ImportError:
        return False
    lines = [ln.split(":", 1)[1].strip() for ln in cv2.getBuildInformation().splitlines()
             if ln.strip().startswith("OpenEXR:")]
    return any(v and v != "NO" for v in lines) and os.environ.get("OPENCV_IO_ENABLE_OPENEXR") == "1"


def read_exr(path: str | os.PathLike, record=None) -> np.ndarray:
    """Read a float OpenEXR file as float32 (H x W x 3 in file channel order R, G, B, or H x W)."""
    path = Path(path)
    _check_file(path, record)
    if not exr_supported():
        raise DatasetError(f"{where(path, record)}: reading .exr needs an OpenCV build with "
                           f"OpenEXR (opencv-python 4.x; OpenCV 5 wheels have none)")
    import cv2

    arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise DatasetError(f"{where(path, record)}: unreadable .exr")
    return arr[..., :3][..., ::-1].astype(np.float32) if arr.ndim == 3 else arr.astype(np.float32)
