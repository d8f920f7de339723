"""Put a finished split folder in place atomically, never deleting a folder another run made."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from sapiens2.errors import BenchError


class SplitExistsError(BenchError, FileExistsError, ValueError):
    """The output folder of a synthetic split exists (or appeared while the split was rendered)."""


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; FileExistsError if ``dst`` exists, even as an empty folder.

    Uses Linux ``renameat2(RENAME_NOREPLACE)``, which checks and renames in one step. Where it is
    missing, ``dst`` is checked just before a plain rename: a non-empty folder created in between
    still makes the rename fail, only an empty one could be replaced.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        rc = renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err == errno.EEXIST:
            raise FileExistsError(err, os.strerror(err), str(dst))
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(src), None, str(dst))
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def _replaceable(out: Path) -> bool:
    """True for what ``overwrite`` may remove: a synthetic split (has ``split.json``) or an empty folder."""
    if out.is_symlink() or not out.is_dir():
        return False
    return (out / "split.json").is_file() or not any(out.iterdir())


def _move_into_place(tmp: Path, out: Path, overwrite: bool) -> None:
    """Rename the finished split ``tmp`` to ``out`` without ever deleting a folder another run made."""
    old = None
    if overwrite and os.path.lexists(out):
        if not _replaceable(out):
            raise ValueError(f"{out}: not a synthetic split (no split.json) and not empty; "
                             "refusing to overwrite it")
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.rename(out, old / "split")  # aside, not deleted, until the new split is in place
    try:
        _rename_noreplace(tmp, out)
    except FileExistsError as e:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise SplitExistsError(
            f"{out} appeared while the split was rendered (another run?); left it as it is and "
            "discarded this run's split (pass overwrite / --overwrite to replace it)"
        ) from e
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
