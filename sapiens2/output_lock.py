"""One writer per output folder: an exclusive, non-blocking lock held for a whole run.

Two runs writing into one folder at the same time would interleave their files (records, side
files, logs, checkpoints) and both exit 0. A run therefore takes ``FOLDER/.sapiens2-bench.lock``
(``flock``) before it reads or writes anything there and keeps it until it returns; a second run
fails at once, before any work, with an error naming the folder and the holder. The kernel drops
the lock when its process dies, so a killed run never leaves a stale lock behind. Under torchrun
rank 0 takes it and every rank raises when rank 0 could not.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with output_lock(folder, "demo"):
    ...     try:
    ...         with output_lock(folder, "second"):
    ...             pass
    ...     except OutputBusyError as e:
    ...         print("busy:", "demo" in str(e))
    busy: True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: flock is not available
    fcntl = None

LOCK_NAME = ".sapiens2-bench.lock"

__all__ = ["LOCK_NAME", "OutputBusyError", "output_lock"]


class OutputBusyError(BenchError):
    """Another run holds the output folder: this one stops before writing anything."""


def _busy(folder: Path, holder: str) -> OutputBusyError:
    return OutputBusyError(
        f"{folder}: another run is writing into this folder ({holder or 'holder unknown'}); two runs "
        "into one output would mix their files. Wait for it to finish, or pass another --out")


def _created_dirs(folder: Path) -> list[Path]:
    """The folders that ``folder.mkdir(parents=True)`` is about to create, deepest first."""
    missing = []
    for p in [folder, *folder.parents]:
        if p.exists():
            break
        missing.append(p)
    return missing


def _acquire(path: Path, what: str) -> int:
    """An fd holding the exclusive lock on ``path``.

    Raises:
        OutputBusyError: another open file description holds it.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise _busy(path.parent, holder) from None
        # A holder that was releasing may have unlinked the file between our open and our flock:
        # a lock on that orphaned inode excludes nobody, so retry on the file now at the path.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{what}, pid {os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _release(fd: int, path: Path, created: list[Path]) -> None:
    try:
        os.unlink(path)  # before closing: a waiter that opened it retries on a fresh file
    except FileNotFoundError:
        pass
    os.close(fd)
    for d in created:  # folders made only for the lock are removed again when left empty
        try:
            d.rmdir()
        except OSError:
            break


@contextmanager
def output_lock(folder: str | os.PathLike, what: str) -> Iterator[Path]:
    """Hold the exclusive lock of ``folder`` (created if missing) for the ``with`` block.

    Args:
        folder: the output folder (a probe's record folder, a pretraining ``--out``).
        what: who holds it, shown to a second run (e.g. ``"probe dinov2_small"``).

    Yields:
        The lock file's path.

    Raises:
        OutputBusyError: another run holds it (raised on every rank under torchrun).
    """
    folder = Path(folder)
    path = folder / LOCK_NAME
    fd, created, error = None, [], ""
    if dist_utils.is_main():
        created = _created_dirs(folder)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = _acquire(path, what)
        except OutputBusyError as e:
            for d in created:
                try:
                    d.rmdir()
                except OSError:
                    break
            error = str(e)
    if dist_utils.is_distributed():
        error = dist_utils.all_gather_object(error)[0]
    if error:
        raise OutputBusyError(error)
    try:
        yield path
    finally:
        if fd is not None:
            _release(fd, path, created)
