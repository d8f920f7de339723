"""The bootstrap side file of a probe record: the resampled metric values behind its intervals.

Beside ``seed<k>.json`` the probe writes ``seed<k>.bootstrap.npz``: one float64 array of length
``resamples`` per interval metric (named by its metric key, e.g. ``mIoU``, ``body/AP``) and
``image_ids``, the test-image ids in the bootstrap's canonical order (resample position ``i`` is
image ``image_ids[i]``). The record's ``intervals`` names the file (``side_file``) and carries
``images_sha256`` (:func:`images_sha256` of the ids) and ``bootstrap_sha256`` (:func:`content_sha256`
of the file's arrays), so a paired comparison can check that two records resampled the same images
and that a side file is the one its record was made with.

Example:
    >>> ids = np.array([3, 5, 8])
    >>> images_sha256(ids) == images_sha256([3, 5, 8]) != images_sha256([3, 5, 9])
    True
    >>> side_path("out/seg/seed0.json").name
    'seed0.bootstrap.npz'
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from sapiens2.utils_io import atomic_write

SIDE_SUFFIX = ".bootstrap.npz"
IDS_KEY = "image_ids"


def side_path(record_path: str | os.PathLike) -> Path:
    """The side file of the record at ``record_path`` (``seed0.json`` -> ``seed0.bootstrap.npz``)."""
    return Path(record_path).with_suffix(SIDE_SUFFIX)


def _ids_list(image_ids: ArrayLike) -> list:
    ids = np.asarray(image_ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iuU":
        raise ValueError(f"bootstrap image ids: expected a 1-D array of integers or strings, got dtype "
                         f"{ids.dtype} shape {ids.shape}")
    return ids.tolist()


def images_sha256(image_ids: ArrayLike) -> str:
    """SHA-256 of the canonical JSON list of the test-image ids (order matters: it is the resample order)."""
    text = json.dumps(_ids_list(image_ids), separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_sha256(dists: dict[str, np.ndarray], image_ids: ArrayLike) -> str:
    """SHA-256 of the resampled values (keys sorted, float64 bytes) and the image ids.

    The same on every rank of a distributed run (the values come from the synced states), unlike the
    bytes of the ``.npz`` file (a zip archive with timestamps).
    """
    h = hashlib.sha256(images_sha256(image_ids).encode("ascii"))
    for key in sorted(dists):
        h.update(key.encode("utf-8") + b"\0")
        h.update(np.ascontiguousarray(dists[key], dtype="<f8").tobytes())
    return h.hexdigest()


def write_side_file(path: str | os.PathLike, dists: dict[str, np.ndarray], image_ids: ArrayLike) -> Path:
    """Write the resampled values and the image ids to ``path`` atomically (temp file + rename).

    Raises:
        ValueError: a metric named like the reserved ``image_ids`` array, or ids that are not a 1-D
            integer/string array.
    """
    if IDS_KEY in dists:
        raise ValueError(f"{path}: a metric may not be named {IDS_KEY!r} (reserved for the image ids)")
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in dists.items()}
    arrays[IDS_KEY] = np.asarray(_ids_list(image_ids))

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a path
            np.savez(f, **arrays)

    return atomic_write(path, _write)


def read_side_file(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The ``{metric: float64 values}`` and the image ids stored in a side file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable side file (names the path and why).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no bootstrap side file")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{path}: not a readable bootstrap side file ({type(e).__name__}: {e})") from e
    if IDS_KEY not in arrays:
        raise ValueError(f"{path}: not a bootstrap side file (no {IDS_KEY!r} array)")
    ids = arrays.pop(IDS_KEY)
    bad = [k for k, v in arrays.items() if v.ndim != 1 or v.dtype != np.float64]
    if bad:
        raise ValueError(f"{path}: arrays {bad} are not 1-D float64 resampled values")
    return arrays, ids


def check_resample_counts(path: str | os.PathLike, dists: dict[str, np.ndarray],
                          resamples: int | None) -> None:
    """Every metric of a side file holds the record's number of resamples.

    Raises:
        ValueError: a metric with another count (a short or cut side file), naming the file, the
            metric and both counts.
    """
    if resamples is None:
        return
    bad = {k: len(v) for k, v in dists.items() if len(v) != int(resamples)}
    if bad:
        key, count = next(iter(bad.items()))
        raise ValueError(
            f"{path}: {key!r} holds {count} resampled values but its record says resamples={resamples}"
            + (f" ({len(bad) - 1} more metric(s) too)" if len(bad) > 1 else "")
            + ": a short or cut bootstrap side file; probe the record again"
        )
