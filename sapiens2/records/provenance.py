"""Provenance of a result record: the source state, versions and device that made it, and the content
hash that identifies its dataset.

Example:
    >>> sorted(provenance(["sapiens2-bench", "run"]))[:3]
    ['command', 'git_commit', 'git_dirty']
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from sapiens2 import __version__
from sapiens2.records.paths import public_command


@lru_cache(maxsize=1)
def _git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the source tree holding this package, or (None, None) outside git."""
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                capture_output=True, text=True, timeout=20)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return commit.stdout.strip(), dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def provenance(command: list[str] | None = None) -> dict:
    """Versions and source state that made a result (package, git, Python, torch, numpy, platform)."""
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover - torch is a hard dependency
        torch_version = None
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover
        numpy_version = None
    commit, dirty = _git_state()
    return {
        "package": "sapiens2-bench",
        "package_version": __version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "torch_version": torch_version,
        "numpy_version": numpy_version,
        "platform": platform.platform(),
        # the author's absolute paths are not published (sapiens2.records.paths)
        "command": public_command(list(sys.argv if command is None else command)),
    }


def device_info(device: Any = "cpu") -> dict:
    """Describe the device a result was computed on (type, name, CPU threads)."""
    dev = str(device)
    kind = dev.split(":")[0]
    name = platform.processor() or platform.machine()
    threads = None
    try:
        import torch

        threads = torch.get_num_threads()
        if kind == "cuda" and torch.cuda.is_available():
            name = torch.cuda.get_device_name(torch.device(dev))
    except ImportError:  # pragma: no cover
        pass
    return {"type": kind, "name": name or None, "num_threads": threads}


_DIGESTS: dict[tuple, str] = {}  # stamp of the files -> digest (see dataset_content_hash)


def dataset_content_hash(root: str | os.PathLike, patterns: Iterable[str] = ("**/*",)) -> str:
    """SHA-256 over the relative paths and bytes of the files under ``root`` (sorted, deterministic).

    Args:
        root: dataset folder (or a single file, e.g. a manifest).
        patterns: glob patterns relative to ``root`` selecting the files that define the split.

    Returns:
        The hex digest.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"{root}: dataset path does not exist")
    if root.is_file():
        files = [root]
    else:
        files = sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})
    # the main job hashes one split once per backbone: the same files, unchanged (same size, change and
    # modification times, inode), are not read again in this process
    stats = [f.stat() for f in files]
    stamp = (str(root.resolve()), tuple(patterns),
             tuple((str(f), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                   for f, st in zip(files, stats)))
    if stamp in _DIGESTS:
        return _DIGESTS[stamp]
    # a file changed within the clock's granularity of now could change again under the same stamp
    # (git's "racy" case): such a digest is not remembered
    racy = any(time.time_ns() - st.st_mtime_ns < 2 * 10**9 for st in stats)
    digest = hashlib.sha256()
    for f in files:
        rel = f.name if f == root else f.relative_to(root).as_posix()
        digest.update(rel.encode("utf-8") + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    if racy:
        return digest.hexdigest()
    if len(_DIGESTS) >= 32:
        _DIGESTS.pop(next(iter(_DIGESTS)))
    _DIGESTS[stamp] = digest.hexdigest()
    return _DIGESTS[stamp]
