"""Small I/O helpers shared by every command: atomic writes and safe checkpoint reads."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def current_umask() -> int:
    """The process umask (read from ``/proc/self/status`` where possible, so nothing is changed).

    Example:
        >>> 0 <= current_umask() <= 0o777
        True
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no read-only query exists: set and restore at once
    os.umask(mask)
    return mask


def default_mode(directory: bool = False) -> int:
    """Mode a plain ``open()`` / ``mkdir()`` would give under the current umask (0o666 / 0o777 minus it)."""
    return (0o777 if directory else 0o666) & ~current_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Write a file atomically: ``write(tmp_path)`` then rename over ``path``.

    The file gets the mode a plain ``open()`` would give it (0o666 minus the umask), not the 0o600
    of the private temporary file it is written to.

    Args:
        path: final destination.
        write: callable that writes the complete file to the temporary path it is given.

    Returns:
        The destination path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, default_mode())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        full = _out_of_space(e, path.parent)
        if full is not None:  # writers such as torch.save say "unexpected pos ..." on a full disk
            raise OSError(errno.ENOSPC, f"no space left on device while writing {path} ({full}; the "
                          f"writer said: {type(e).__name__}: {e}); nothing was written there") from e
        raise
    return path


# Below this many free bytes a failed write is taken for a full disk.
_LOW_SPACE = 1 << 20


def _out_of_space(e: BaseException, folder: Path) -> str | None:
    """Why a failed write looks like a full disk (``ENOSPC``, or almost no free space left), else None."""
    if not isinstance(e, Exception):
        return None
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return "ENOSPC"
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    return f"{free} bytes free there" if free < _LOW_SPACE else None


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""

    def _w(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    return atomic_write(path, _w)


def write_json_atomic(path: str | os.PathLike, obj: Any, indent: int = 2) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (NaN is written as null)."""
    return write_text_atomic(path, json.dumps(_nan_to_none(obj), indent=indent, allow_nan=False) + "\n")


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nan_to_none(v) for v in obj]
    return obj


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file; a missing or malformed file raises an error naming the path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: malformed JSON ({e})") from e


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of a file's bytes, read in 1 MiB chunks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
