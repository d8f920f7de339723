"""Readers of dense prediction / GT / mask files for ``sapiens2-bench eval`` (formats in docs/evaluators.md).

* ``.npy``: arrays as saved by NumPy; images as C x H x W or H x W x C (C = 3), label maps H x W.
* ``.png``: seg labels (8- or 16-bit single channel), normals (8- or 16-bit RGB, ``n = v / vmax * 2 - 1``),
  albedo (8- or 16-bit RGB, ``a = v / vmax``), masks (nonzero = valid).
* ``.exr``: float RGB (normals, pointmaps, albedo) through OpenCV's OpenEXR codec, which this module
  enables (``OPENCV_IO_ENABLE_OPENEXR=1``) before the first read.

Files are matched by stem: ``gt/0001.png`` goes with ``pred/0001.npy`` and ``mask/0001.png``.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(d / "a.npy", np.zeros((4, 5, 3), np.float32))
    >>> read_image(d / "a.npy", "pred_normal").shape
    (3, 4, 5)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SUPPORTED = (".npy", ".png", ".exr")


def _cv2():
    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    try:
        import cv2
    except ImportError as e:  # pragma: no cover - opencv is in the test extras
        raise RuntimeError("reading .png/.exr files needs opencv-python-headless (pip install it)") from e
    return cv2


def _read_raw(path: Path, what: str) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {what} file not found")
    ext = path.suffix.lower()
    if ext == ".npy":
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise ValueError(f"{path}: unreadable .npy {what} ({e})") from e
    if ext in (".png", ".exr"):
        cv2 = _cv2()
        arr = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        if arr is None:
            raise ValueError(f"{path}: unreadable {ext} {what}")
        if arr.ndim == 3:
            arr = arr[..., :3][..., ::-1]  # BGR(A) -> RGB
        return np.ascontiguousarray(arr)
    raise ValueError(f"{path}: unsupported {what} format {ext!r}; expected one of {SUPPORTED}")


def read_labels(path: Path, what: str = "labels") -> np.ndarray:
    """Read an H x W integer label map (.png 8/16-bit or .npy)."""
    arr = _read_raw(path, what)
    if arr.ndim == 3 and arr.shape[-1] == 3 and Path(path).suffix.lower() == ".png":
        if not ((arr[..., 0] == arr[..., 1]).all() and (arr[..., 1] == arr[..., 2]).all()):
            raise ValueError(f"{path}: {what} must be a single-channel label PNG, got a colour image")
        arr = arr[..., 0]
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{path}: {what} must be an H x W integer label map, got {arr.shape} {arr.dtype}")
    return arr.astype(np.int64)


def read_logits_or_labels(path: Path, what: str = "pred_seg") -> tuple[np.ndarray, bool]:
    """Read a seg prediction: C x h x w float logits (.npy) or H x W labels. Returns (array, is_labels)."""
    if Path(path).suffix.lower() == ".npy":
        arr = _read_raw(path, what)
        if arr.ndim == 3 and np.issubdtype(arr.dtype, np.floating):
            return arr.astype(np.float32), False
        if arr.ndim == 2 and np.issubdtype(arr.dtype, np.integer):
            return arr.astype(np.int64), True
        raise ValueError(
            f"{path}: {what} must be C x h x w float logits or H x W integer labels, got "
            f"{arr.shape} {arr.dtype}"
        )
    return read_labels(path, what), True


def read_image(path: Path, what: str, kind: str = "float") -> np.ndarray:
    """Read a 3-channel map as float32 3 x H x W.

    Args:
        path: .npy (C x H x W or H x W x C), .png (8/16-bit RGB) or .exr file.
        what: name used in error messages.
        kind: how integer PNG values map to floats: ``"normal"`` (``v / vmax * 2 - 1``), ``"unit"``
            (``v / vmax``) or ``"float"`` (integer PNGs rejected: pointmaps need real units).
    """
    arr = _read_raw(path, what)
    if np.issubdtype(arr.dtype, np.integer):
        if kind == "float":
            raise ValueError(f"{path}: {what} must hold float values (.npy/.exr), got integer {arr.dtype}")
        vmax = float(np.iinfo(arr.dtype).max)
        arr = arr.astype(np.float64) / vmax
        if kind == "normal":
            arr = arr * 2.0 - 1.0
    if arr.ndim != 3:
        raise ValueError(f"{path}: {what} must be a 3-channel image, got shape {arr.shape}")
    if arr.shape[0] == 3 and arr.shape[-1] != 3:
        pass
    elif arr.shape[-1] == 3:
        arr = np.moveaxis(arr, -1, 0)
    else:
        raise ValueError(f"{path}: {what} must be 3 x H x W or H x W x 3, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def read_mask(path: Path, what: str = "mask") -> np.ndarray:
    """Read an H x W mask (.png nonzero, .npy bool / number > 0.5) as bool."""
    arr = _read_raw(path, what)
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim == 3:
        arr = arr.max(-1) if arr.shape[-1] in (3, 4) else arr
    if arr.ndim != 2:
        raise ValueError(f"{path}: {what} must be H x W, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr
    if Path(path).suffix.lower() == ".png":
        return arr > 0
    return arr > 0.5


def pair_files(
    pred_dir: Path, gt_dir: Path, mask_dir: Path | None = None
) -> list[tuple[str, Path, Path, Path | None]]:
    """Match prediction, GT (and mask) files by stem.

    Returns:
        ``(stem, pred_path, gt_path, mask_path)`` sorted by stem.

    Raises:
        FileNotFoundError: a folder is missing or empty, or a GT file has no prediction (or mask).
    """

    def index(d: Path, what: str) -> dict[str, Path]:
        d = Path(d)
        if not d.is_dir():
            raise FileNotFoundError(f"{d}: {what} folder not found")
        files = {}
        for p in sorted(d.iterdir()):
            if p.is_file() and p.suffix.lower() in SUPPORTED:
                if p.stem in files:
                    raise ValueError(f"{d}: two {what} files share the stem {p.stem!r}")
                files[p.stem] = p
        if not files:
            raise FileNotFoundError(f"{d}: no {what} files ({', '.join(SUPPORTED)})")
        return files

    gts = index(gt_dir, "GT")
    preds = index(pred_dir, "prediction")
    masks = index(mask_dir, "mask") if mask_dir is not None else None
    missing = sorted(set(gts) - set(preds))
    if missing:
        raise FileNotFoundError(
            f"{pred_dir}: no prediction for GT file(s) {missing[:5]}"
            + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else "")
        )
    if masks is not None:
        missing = sorted(set(gts) - set(masks))
        if missing:
            raise FileNotFoundError(f"{mask_dir}: no mask for GT file(s) {missing[:5]}")
    return [(s, preds[s], gts[s], masks[s] if masks is not None else None) for s in sorted(gts)]
