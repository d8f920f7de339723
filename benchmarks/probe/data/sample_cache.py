"""Prepared probe samples kept on disk, so that backbones probed one after another read a split once.

Reading a scene (decoding its image and maps, cutting a pose crop) costs the same for every
backbone, and the main job probes seven on one split: without a cache each of them decodes every
file again. With ``sample_cache=DIR`` the :class:`~benchmarks.probe.data.loader.SceneLoader` keeps each
batch's sample dicts in ``DIR/<key>/<first>-<count>.safetensors`` the first time it reads them and
reads that file afterwards. The key covers everything a sample depends on: the split, the tasks of
the scene group, the content hash of the data folder (every byte of every file), each task's
protocol id (input size, vocabulary, ...), the sample limit, and a hash of the code that reads
samples (the dataset readers and the loader), so a changed file, protocol or reader never reads a
stale entry. Samples round-trip exactly: tensors and arrays bit for bit (same dtype and shape),
numbers and strings through JSON (``repr``-exact floats), tuples as tuples.

A file is written to a temporary name and renamed into place (a killed run leaves no half entry);
a file that no longer reads back, or that holds other positions than its name says, is an error
naming it. Nothing of the split stays in memory: a batch is read, used and dropped as before.

Example:
    >>> import tempfile, torch
    >>> c = SampleCache(tempfile.mkdtemp(), "k")
    >>> c.store([0, 1], [{"id": "a", "image": torch.zeros(3, 2, 2), "size": (2, 2)},
    ...                  {"id": "b", "image": torch.ones(3, 2, 2), "size": (2, 2)}])
    >>> got = c.load([0, 1])
    >>> got[1]["id"], got[1]["size"], float(got[1]["image"].sum())
    ('b', (2, 2), 12.0)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from sapiens2.utils_io import atomic_write

FORMAT = 1  # bump when the file layout changes


class SampleCacheError(ValueError):
    """A sample-cache file that cannot be used, or a sample value the cache cannot store."""


@lru_cache(maxsize=1)  # the sources of this process's imported readers
def code_fingerprint() -> str:
    """SHA-256 (12 hex) of the sources that turn files into samples: ``sapiens2/datasets`` and the loader."""
    here = Path(__file__).resolve()
    files = sorted((here.parents[3] / "sapiens2" / "datasets").rglob("*.py"))
    files += [here.parent / "loader.py", here.parent / "source.py", here]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def cache_key(split: str, tasks: Sequence[str], content_hashes: Iterable[str], protocol_ids: Iterable[str],
              limit: int) -> str:
    """The folder name of one scene group's samples (see the module docstring for what it covers)."""
    ident = {"format": FORMAT, "split": split, "tasks": list(tasks), "content": list(content_hashes),
             "protocol": list(protocol_ids), "limit": int(limit), "code": code_fingerprint()}
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    return f"{split}-{'+'.join(tasks)}-{digest}"


def _encode(value: object, name: str, tensors: dict, where: str) -> object:
    """The JSON skeleton of ``value``; its tensors and arrays go to ``tensors`` under ``name``."""
    if isinstance(value, torch.Tensor):
        tensors[name] = value.detach().cpu().contiguous().clone()
        return {"__tensor__": name}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise SampleCacheError(f"{where}: {name} is an object array (the sample cache stores numbers)")
        tensors[name] = torch.from_numpy(np.ascontiguousarray(value)).clone()
        return {"__ndarray__": name}
    if isinstance(value, np.generic):
        return {"__npscalar__": value.dtype.str, "value": value.item()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{name}.{i}", tensors, where) for i, v in enumerate(value)]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise SampleCacheError(f"{where}: {name} has keys that are not strings")
        return {"__dict__": {k: _encode(v, f"{name}.{k}", tensors, where) for k, v in value.items()}}
    raise SampleCacheError(f"{where}: {name} is a {type(value).__name__}, which the sample cache "
                           "cannot store (tensors, arrays, numbers, strings, lists, tuples, dicts)")


def _decode(node: object, tensors: dict) -> object:
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        return tensors[node["__tensor__"]]
    if "__ndarray__" in node:
        return tensors[node["__ndarray__"]].numpy()
    if "__npscalar__" in node:
        return np.dtype(node["__npscalar__"]).type(node["value"])
    if "__tuple__" in node:
        return tuple(_decode(v, tensors) for v in node["__tuple__"])
    return {k: _decode(v, tensors) for k, v in node["__dict__"].items()}


class SampleCache:
    """One scene group's cached batches under ``root/key`` (see the module docstring).

    Args:
        root: the cache folder (shared by groups, splits and runs; each key has its own subfolder).
        key: :func:`cache_key` of the group.
    """

    def __init__(self, root: str | os.PathLike, key: str):
        self.dir = Path(root) / key

    def _path(self, positions: Sequence[int]) -> Path:
        return self.dir / f"{positions[0]}-{len(positions)}.safetensors"

    def load(self, positions: list[int]) -> list[dict] | None:
        """The samples at ``positions`` (split order), or None when not cached yet."""
        path = self._path(positions)
        if not path.is_file():
            return None
        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
            skeleton = json.loads(meta["samples"])
            stored = json.loads(meta["positions"])
        except (SafetensorError, OSError, KeyError, ValueError) as e:
            raise SampleCacheError(f"sample cache {path}: unreadable ({type(e).__name__}: {e}); "
                                   f"delete {self.dir} to rebuild it") from e
        if stored != list(positions):
            raise SampleCacheError(f"sample cache {path}: holds positions {stored[:4]}..., expected "
                                   f"{list(positions)[:4]}...; delete {self.dir} to rebuild it")
        return [_decode(s, tensors) for s in skeleton]

    def store(self, positions: list[int], samples: list[dict]) -> None:
        """Write the samples at ``positions`` (atomically; an existing entry is left as it is)."""
        path = self._path(positions)
        if path.is_file():
            return
        tensors: dict = {}
        where = f"sample cache {path}"
        skeleton = [_encode(s, f"{i}", tensors, where) for i, s in enumerate(samples)]
        meta = {"samples": json.dumps(skeleton), "positions": json.dumps(list(positions)),
                "format": str(FORMAT)}
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))
