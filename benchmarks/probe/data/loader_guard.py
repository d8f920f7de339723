"""Loader worker processes that cannot hang a run, and whose errors read like the project's own.

:func:`guarded_batches` runs a map-style dataset of batches through a ``torch.utils.data.DataLoader``
with worker processes, with two guards:

* a timeout (:func:`loader_timeout`: ``$SAPIENS2_LOADER_TIMEOUT`` seconds, default 600; 0 waits
  forever): when the batch the run waits for has not come after that long (a worker stuck on a hung
  network mount, a stopped process), the workers are ended and :class:`LoaderTimeoutError` names the
  worker (its number and process id) and what it was reading (the batch's scenes and files);
* a worker's exception is sent back as a value and raised again in the main process as itself (a
  ``DatasetError`` naming the file stays that one-line error), instead of torch's re-raise that wraps
  the message in the worker's 30-line traceback.

The timeout counts only the time the main process waits for a batch, not the time it spends on
the batches it already has.
"""

from __future__ import annotations

import os
import pickle
import re
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from PIL import Image
from torch.utils.data import DataLoader, Dataset, _utils, get_worker_info

from sapiens2.datasets.base import ManifestDataset
from sapiens2.datasets.pose import PoseTopdownDataset
from sapiens2.errors import BenchError

if TYPE_CHECKING:
    from benchmarks.probe.data.batching import SceneBatch


class _Group(Protocol):
    """What the guard reads of a scene group (:class:`benchmarks.probe.data.loader._Group`, which
    imports this module): its per-task parts and its batches."""

    parts: list

    def batch(self, positions: list[int], with_targets: bool = True, with_images: bool = True) -> SceneBatch:
        ...

__all__ = ["DEFAULT_TIMEOUT_S", "TIMEOUT_ENV", "BatchMemoryError", "LoaderTimeoutError", "LoaderWorkerError",
           "describe_chunk", "guarded_batches", "loader_timeout", "read_batch"]

TIMEOUT_ENV = "SAPIENS2_LOADER_TIMEOUT"
# a batch of 8 large photos decodes in seconds; ten minutes without one is a stuck worker, not slow disk
DEFAULT_TIMEOUT_S = 600.0


class LoaderTimeoutError(BenchError, RuntimeError):
    """A loader worker sent nothing for the loader timeout (names the worker and what it was reading)."""


class LoaderWorkerError(BenchError, RuntimeError):
    """A worker's exception that could not be sent back as itself (its type and message)."""


def loader_timeout() -> float:
    """Seconds the run waits for one batch from its loader workers (``$SAPIENS2_LOADER_TIMEOUT``; 0: forever).

    Raises:
        ValueError: the variable is not a number of seconds >= 0.
    """
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"${TIMEOUT_ENV}: expected seconds >= 0 (0: wait forever), got {text!r}")
    return value


class _Failure:
    """A worker's exception, carried back to the main process as a batch."""

    def __init__(self, error: BaseException, worker: int):
        self.worker = worker
        self.trace = traceback.format_exc()
        try:  # the exception itself when it survives the trip (most do); else its type and message
            pickle.loads(pickle.dumps(error))
            self.error: BaseException = error
        except Exception:  # noqa: BLE001 - any failure to pickle means: send the text instead
            self.error = LoaderWorkerError(f"{type(error).__name__}: {error}")


class _Guarded(Dataset):
    """The batches, with a worker's exception returned as a :class:`_Failure` instead of raised."""

    def __init__(self, batches: Dataset):
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, k: int) -> object:
        info = get_worker_info()
        try:
            return self.batches[k]
        except Exception as e:  # noqa: BLE001 - every error goes back to the main process as itself
            if info is None:
                raise
            return _Failure(e, info.id)


def _scene_file(reader: Dataset, index: int) -> str | None:
    """The image file of a reader's sample ``index`` (None when the reader does not say)."""

    if isinstance(reader, ManifestDataset):
        return str(reader.path(reader.records[index], "image"))
    if isinstance(reader, PoseTopdownDataset):
        return str(reader._image_path(reader.images[reader.anns[index]["image_id"]]))
    return None


def _positions_text(group: _Group, positions: list[int]) -> tuple[str, list[str]]:
    """(what ``positions`` of a scene group are: split, scenes and files; the files)."""
    first = group.parts[0]
    files = []
    if getattr(first, "reader", None) is not None:
        files = [f for f in (_scene_file(first.reader, first.keep[p]) for p in positions) if f]
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    span = f"{positions[0]}" if len(positions) == 1 else f"{positions[0]}..{positions[-1]}"
    plural = "s" if len(positions) > 1 else ""
    text = f"{first.where} (scene{plural} {span}" + (f": {shown})" if shown else ")")
    return text, files


def describe_chunk(group: _Group, chunks: list[list[int]], k: int) -> str:
    """What batch ``k`` of a scene group reads: its tasks and split, scene positions and image files."""
    return f"batch {k} of " + _positions_text(group, chunks[k])[0]


class BatchMemoryError(BenchError, MemoryError):
    """Preparing a batch ran out of memory (names the batch's files and the largest image)."""


_OOM_TEXT = ("can't allocate memory", "not enough memory", "Cannot allocate memory", "out of memory")


def _largest_image(files: list[str]) -> str:
    """``"W x H (M megapixels) in FILE"`` of the largest image among ``files`` (header reads only)."""

    best = None
    for f in files:
        try:
            with Image.open(f) as im:
                w, h = im.size
        except (OSError, ValueError):  # not an image Pillow reads (a map): sized by its reader's error
            continue
        if best is None or w * h > best[0] * best[1]:
            best = (w, h, f)
    if best is None:
        return ""
    w, h, f = best
    return f"; the largest image is {w} x {h} ({w * h / 1e6:.1f} megapixels) in {f}"


def read_batch(group: _Group, positions: list[int], with_targets: bool = True,
               with_images: bool = True) -> SceneBatch:
    """``group.batch(...)``, an out-of-memory failure turned into :class:`BatchMemoryError` naming the files.

    Decoding checks each image against the memory before any pixel is read, but the float copies, the
    resize and the task's full-resolution targets (e.g. per-class maps of a 9000 x 9000 label map) need
    many more bytes per pixel than the decode; the allocator's own message names no file.
    """
    try:
        return group.batch(positions, with_targets, with_images)
    except (MemoryError, RuntimeError) as e:
        text = str(e)
        if not isinstance(e, MemoryError) and not any(m in text for m in _OOM_TEXT):
            raise
        what, files = _positions_text(group, positions)
        asked = re.search(r"tried to allocate (\d+) bytes", text)
        cause = (f"an allocation of {int(asked.group(1)) / 2**30:.2f} GiB failed" if asked
                 else text.splitlines()[0][:200] if text else type(e).__name__)
        raise BatchMemoryError(
            f"{what}: out of memory preparing the batch ({cause}){_largest_image(files)}; images this "
            "large need several GiB each at full resolution (images, resize, the task's targets): "
            "downscale them, or run where more memory is available"
        ) from None


def _end_workers(it: Iterator) -> None:
    """Kill the iterator's workers (a stopped or hung one would not exit when asked) and shut it down."""

    if getattr(it, "_worker_pids_set", False):  # ours to end: torch's SIGCHLD watch must not report it
        _utils.signal_handling._remove_worker_pids(id(it))
        it._worker_pids_set = False
    for w in getattr(it, "_workers", []):
        if w.is_alive():
            w.kill()
            w.join(timeout=5)
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


def _waited_worker(it: Iterator, k: int, num_workers: int) -> tuple[int, int | None]:
    """(worker number, process id) of the worker batch ``k`` was sent to."""
    task = getattr(it, "_task_info", {}).get(getattr(it, "_rcvd_idx", k))
    worker = task[0] if task else k % num_workers  # indices go round-robin to the workers
    workers = getattr(it, "_workers", [])
    return worker, (workers[worker].pid if worker < len(workers) else None)


def guarded_batches(batches: Dataset, num_workers: int, describe: Callable[[int], str],
                    timeout: float | None = None) -> Iterator:
    """Yield ``batches[0], batches[1], ...`` read by ``num_workers`` worker processes, guarded.

    Args:
        batches: a map-style dataset whose items are whole batches (``DataLoader(batch_size=None)``).
        num_workers: worker processes (> 0).
        describe: batch number -> what reading it means (its scenes and files), for the timeout message.
        timeout: seconds to wait for one batch (None: :func:`loader_timeout`; 0: forever).

    Raises:
        LoaderTimeoutError: a batch did not come within the timeout (the workers are ended first).
        Exception: a worker's own exception, raised again as itself.
    """
    timeout = loader_timeout() if timeout is None else float(timeout)
    loader = DataLoader(_Guarded(batches), batch_size=None, shuffle=False, num_workers=num_workers,
                        persistent_workers=False, timeout=timeout)
    it = iter(loader)
    k = 0
    try:
        while True:
            try:
                item = next(it)
            except StopIteration:
                return
            except RuntimeError as e:
                if "timed out" not in str(e):
                    raise
                worker, pid = _waited_worker(it, k, num_workers)
                _end_workers(it)
                raise LoaderTimeoutError(
                    f"data loader worker {worker} (pid {pid}) sent nothing for {timeout:g} s; it was to "
                    f"read {describe(k)}. A hung file system or a stopped process? The run is ended; for "
                    f"slow storage set ${TIMEOUT_ENV} to more seconds (0: wait forever)"
                ) from None
            if isinstance(item, _Failure):
                _end_workers(it)
                raise item.error from None
            yield item
            k += 1
    finally:
        _end_workers(it)
