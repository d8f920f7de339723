"""Manifest-based dataset base class and the batch collate function.

A dense-task split is one JSON manifest::

    {"task": "seg", "format_version": 1, "records": [{"id": "0001", "image": "images/0001.png", ...}]}

Paths in records are relative to ``data_root`` (default: the manifest's folder). Records are
checked when the dataset is built (required keys, unique ids, files present) and each file is
checked again when it is read (readable, shapes, sizes, value ranges).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from sapiens2.utils_io import read_json

from .io import DatasetError, read_rgb, where

FORMAT_VERSION = 1


def load_manifest(path: str | os.PathLike, task: str, required: tuple[str, ...]) -> list[dict]:
    """Read and check a dense-task manifest; return its records.

    Args:
        path: manifest JSON file.
        task: expected ``task`` value.
        required: keys every record must have (besides ``id`` and ``image``).

    Raises:
        DatasetError: malformed manifest, wrong task, missing keys or duplicate ids.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise DatasetError(f"{path}: manifest must be an object with a 'records' list")
    if data.get("task") != task:
        raise DatasetError(f"{path}: manifest is for task {data.get('task')!r}, expected {task!r}")
    seen: set[str] = set()
    for i, rec in enumerate(data["records"]):
        if not isinstance(rec, dict):
            raise DatasetError(f"{where(path, i)}: record must be an object")
        missing = [k for k in ("id", "image", *required) if k not in rec]
        if missing:
            raise DatasetError(f"{where(path, repr(rec.get('id', i)))}: record lacks {missing}")
        rid = str(rec["id"])
        if rid in seen:
            raise DatasetError(f"{where(path, repr(rid))}: duplicate record id")
        seen.add(rid)
    return data["records"]


class ManifestDataset(Dataset):
    """Base class of the dense-task readers.

    Args:
        ann_file: manifest JSON path.
        data_root: folder the record paths are relative to (default: the manifest's folder).
        check_files: check at construction that every referenced file exists.
    """

    task = ""
    file_keys: tuple[str, ...] = ()
    optional_file_keys: tuple[str, ...] = ()

    def __init__(
        self,
        ann_file: str | os.PathLike,
        data_root: str | os.PathLike | None = None,
        check_files: bool = True,
    ) -> None:
        self.ann_file = Path(ann_file)
        self.data_root = Path(data_root) if data_root is not None else self.ann_file.parent
        self.records = load_manifest(self.ann_file, self.task, self.file_keys)
        if check_files:
            for rec in self.records:
                for key in ("image", *self.file_keys, *self.optional_file_keys):
                    if isinstance(rec.get(key), str) and not self.path(rec, key).is_file():
                        raise DatasetError(
                            f"{where(self.path(rec, key), self._rec(rec))}: {key} file not found"
                        )

    def __len__(self) -> int:
        return len(self.records)

    def path(self, rec: dict, key: str) -> Path:
        """Absolute path of file ``key`` of record ``rec``."""
        p = Path(rec[key])
        return p if p.is_absolute() else self.data_root / p

    def _rec(self, rec: dict) -> str:
        return f"{rec['id']!r} of {self.ann_file}"

    def _base_sample(self, index: int) -> tuple[dict, dict, np.ndarray]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__}: index {index} out of range for {len(self)} samples")
        index = index % len(self)
        rec = self.records[index]
        img = read_rgb(self.path(rec, "image"), self._rec(rec))
        sample = {
            "index": index,
            "id": str(rec["id"]),
            "image": to_chw(img.astype(np.float32) / 255.0),
            "image_path": str(self.path(rec, "image")),
            "orig_size": (int(img.shape[0]), int(img.shape[1])),
        }
        return rec, sample, img

    def __getitem__(self, index: int) -> dict:
        raise NotImplementedError


def to_chw(arr: np.ndarray) -> torch.Tensor:
    """H x W x C array to a C x H x W float32 tensor."""
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1), dtype=np.float32))


def collate(batch: list[dict]) -> dict:
    """Collate sample dicts into a batch dict.

    Tensors of equal shape are stacked, numbers become 1-D tensors, nested dicts are collated
    recursively, and everything else (strings, tensors of different shapes, tuples) becomes a list.

    Args:
        batch: samples from one of the readers.

    Returns:
        The batch dict with the same keys.
    """
    if not batch:
        raise ValueError("collate: empty batch")
    out: dict[str, Any] = {}
    for key in batch[0]:
        vals = [b[key] for b in batch]
        first = vals[0]
        if isinstance(first, torch.Tensor) and all(
            isinstance(v, torch.Tensor) and v.shape == first.shape for v in vals
        ):
            out[key] = torch.stack(vals)
        elif isinstance(first, bool):
            out[key] = torch.tensor(vals, dtype=torch.bool)
        elif isinstance(first, int) and all(isinstance(v, int) for v in vals):
            out[key] = torch.tensor(vals, dtype=torch.int64)
        elif isinstance(first, float) and all(isinstance(v, (int, float)) for v in vals):
            out[key] = torch.tensor(vals, dtype=torch.float32)
        elif isinstance(first, dict):
            out[key] = collate(vals)
        else:
            out[key] = vals
    return out
