"""The identity of a split: the content of every file its readers read, wherever that file lives.

``data import`` writes manifests that point at the user's photos (and label PNGs) by absolute path,
so the bytes under the split folder alone do not say what a probe reads. :func:`split_identity`
is the folder's content hash (``sapiens2.records.provenance.dataset_content_hash``: relative paths
and bytes of every file under it) extended by the SHA-256 of every file outside the folder that a
manifest names (its images, maps, masks, intrinsics, keypoint / label set JSON). A split with no
file outside its folder (``data synth``) keeps the folder hash unchanged.

Hashing the referenced files, rather than copying or hard-linking them into the split, is the
choice documented in ``sapiens2/datasets/README.md`` ("Identity of a split"). Each file's digest is
remembered by its stamp (resolved path, size, modification and change times in ns, inode), in this
process and in ``$SAPIENS2_BENCH_CACHE/file_digests.json`` (default ``~/.cache/sapiens2-bench``), so
an unchanged photo is read once, not once per run; a changed one has another stamp and is read again.

Example::

    from sapiens2.datasets.identity import split_identity
    split_identity("my_split")      # 64 hex digits; changes when any photo or label changes
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from sapiens2.records.provenance import dataset_content_hash
from sapiens2.utils_io import read_json

from .base import ManifestDataset
from .io import DatasetError
from .pose import PoseTopdownDataset
from .split import open_split, split_info

__all__ = ["file_digest", "referenced_files", "split_identity"]

# top-level manifest keys that may name a vocabulary JSON relative to the manifest
_VOCAB_KEYS = ("label_set", "keypoint_set")
_MEMO: dict[tuple, str] = {}
_DISK: dict[str, str] | None = None  # the on-disk memo, read on first use
_DIRTY = False  # digests added since the memo was last written
_DISK_MAX = 200_000  # entries kept on disk (oldest dropped first): about 30 MB of JSON
# a file modified this close to now may change again under the same stamp (git's "racy" case)
_RACY_NS = 2 * 10**9


def _memo_path() -> Path:
    base = os.environ.get("SAPIENS2_BENCH_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "sapiens2-bench"
    return root / "file_digests.json"


def _disk_memo() -> dict[str, str]:
    global _DISK
    if _DISK is None:
        try:
            data = json.loads(_memo_path().read_text())
            _DISK = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError):  # no memo yet, or a torn one: digests are recomputed
            _DISK = {}
    return _DISK


def _save_disk_memo() -> None:
    global _DIRTY
    if not _DIRTY:
        return
    _DIRTY = False
    memo = _disk_memo()
    while len(memo) > _DISK_MAX:
        memo.pop(next(iter(memo)))
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".file_digests.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(memo, fh)
        os.replace(tmp, path)
    except OSError:  # a read-only home: the memo only saves time, every digest is still computed
        pass


def _stamp(path: Path) -> tuple[str, os.stat_result]:
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}"
    return key, st


def file_digest(path: str | os.PathLike, remember: bool = True) -> str:
    """SHA-256 of one file's bytes, remembered by its stamp (see the module docstring).

    Args:
        path: the file.
        remember: keep the digest in the on-disk memo (callers hashing many files save once at the end).

    Raises:
        DatasetError: the file is missing or unreadable (named).
    """
    global _DIRTY
    path = Path(path).resolve()
    try:
        key, st = _stamp(path)
        if key in _MEMO:
            return _MEMO[key]
        if key in _disk_memo():
            _MEMO[key] = _disk_memo()[key]
            return _MEMO[key]
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it to hash the split's content ({e.strerror or e})") \
            from None
    digest = h.hexdigest()
    if time.time_ns() - st.st_mtime_ns >= _RACY_NS:
        _MEMO[key] = digest
        _disk_memo()[key] = digest
        _DIRTY = True
        if remember:
            _save_disk_memo()
    return digest


def _reader_files(reader) -> list[Path]:
    """The files one reader reads, in manifest order."""
    if hasattr(reader, "referenced_files"):  # a plug-in reader lists its own files
        return [Path(p) for p in reader.referenced_files()]
    if isinstance(reader, ManifestDataset):
        keys = ("image", *reader.file_keys, *reader.optional_file_keys)
        return [reader.path(rec, k) for rec in reader.records for k in keys if isinstance(rec.get(k), str)]
    if isinstance(reader, PoseTopdownDataset):
        return [reader._image_path(im) for im in reader.coco["images"]]
    raise DatasetError(
        f"{reader.ann_file if hasattr(reader, 'ann_file') else reader}: the reader "
        f"{type(reader).__name__} cannot say which files it reads, so the split's identity would miss "
        "them: give it a referenced_files() method returning their paths"
    )


def referenced_files(split_dir: str | os.PathLike, tasks=None) -> list[Path]:
    """Every file the split's manifests name (images, maps, masks, K files, vocabulary JSON), absolute,
    in a fixed order (tasks sorted, then manifest order), each once.

    Args:
        split_dir: a folder with ``split.json``.
        tasks: the tasks whose manifests count (None: every task of ``split.json``).
    """
    split_dir = Path(split_dir)
    listed = split_info(split_dir)["tasks"]
    out: dict[Path, None] = {}
    for task in sorted(listed if tasks is None else set(tasks) & set(listed)):
        manifest = split_dir / listed[task]
        if not manifest.is_file():
            continue
        head = read_json(manifest)
        for key in _VOCAB_KEYS:
            spec = head.get(key) if isinstance(head, dict) else None
            if isinstance(spec, str) and spec.lower().endswith(".json"):
                p = Path(spec)
                out.setdefault(p if p.is_absolute() else manifest.parent / p, None)
        for p in _reader_files(open_split(split_dir, task)):
            out.setdefault(Path(os.path.abspath(p)), None)
    return list(out)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
        return True
    except ValueError:
        return False


def split_identity(split_dir: str | os.PathLike, tasks=None) -> str:
    """The content identity of a split folder (see the module docstring).

    Args:
        split_dir: a folder with ``split.json`` (a folder without one: its files alone).
        tasks: the tasks read (None: all): only their manifests' outside files count, so a run of one
            task neither reads nor depends on another task's photos or labels.

    Returns:
        64 hex digits: the folder's content hash when every referenced file is inside it, else
        SHA-256 over that hash and the digests of the files outside, in manifest order.

    Raises:
        DatasetError: a referenced file is missing or unreadable (named).
    """
    split_dir = Path(split_dir)
    inner = dataset_content_hash(split_dir)
    if not (split_dir / "split.json").is_file():
        return inner
    root = split_dir.resolve()
    outside = [p for p in referenced_files(split_dir, tasks) if not _inside(p, root)]
    if not outside:
        return inner
    h = hashlib.sha256(b"sapiens2 split identity 1\0" + inner.encode() + b"\0")
    for p in outside:
        if not p.is_file():
            raise DatasetError(f"{p}: a file the split {split_dir} names does not exist")
        h.update(file_digest(p, remember=False).encode() + b"\0")
    _save_disk_memo()
    return h.hexdigest()
