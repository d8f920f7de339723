"""Open the task datasets of a split folder (a ``split.json`` listing one manifest per task)."""

from __future__ import annotations

import os
from pathlib import Path

from sapiens2.errors import UnknownNameError
from sapiens2.registry import DATASETS
from sapiens2.tasks import get_task, task_names
from sapiens2.utils_io import read_json

from .io import DatasetError


def split_info(split_dir: str | os.PathLike) -> dict:
    """Read ``split.json`` of a split folder."""
    path = Path(split_dir) / "split.json"
    if not path.is_file():
        raise DatasetError(
            f"{split_dir}: not a split folder (no split.json); make one with `sapiens2-bench data synth`"
        )
    info = read_json(path)
    if not isinstance(info.get("tasks"), dict):
        raise DatasetError(f"{path}: 'tasks' must map task names to manifest files")
    return info


def available_tasks(split_dir: str | os.PathLike) -> list[str]:
    """Tasks whose manifest exists in the split folder."""
    info = split_info(split_dir)
    return [t for t, m in info["tasks"].items() if (Path(split_dir) / m).is_file()]


def data_tasks(root: str | os.PathLike, splits: tuple[str, ...] = ("train", "test")) -> list[str] | None:
    """Tasks whose ground truth a data folder has, in task-table order; None for a folder of neither
    layout (the readers then name what is missing).

    ``root`` is one split folder (its own ``split.json``), or holds one split folder per name in
    ``splits``, and then a task counts when every one of them has it.
    """
    root = Path(root)
    folders = [root] if (root / "split.json").is_file() else [root / s for s in splits]
    if not all((f / "split.json").is_file() for f in folders):
        return None
    have = set.intersection(*(set(available_tasks(f)) for f in folders))
    return [t for t in task_names() if t in have]


def open_split(split_dir: str | os.PathLike, task: str, **kwargs):
    """Build the reader of ``task`` for a split folder.

    Args:
        split_dir: folder with ``split.json``.
        task: a task of the task table (``sapiens2.tasks``); its spec names the reader.
        **kwargs: passed to the reader (e.g. ``input_size=(192, 256)`` for pose).

    Returns:
        The dataset.

    Raises:
        UnknownNameError: unknown task.
        DatasetError: the split has no ground truth for it.
    """
    if task not in task_names():
        raise UnknownNameError("task", task, task_names())
    info = split_info(split_dir)
    manifest = info["tasks"].get(task)
    if manifest is None or not (Path(split_dir) / manifest).is_file():
        raise DatasetError(
            f"{split_dir}: the split has no {task} ground truth (manifest {manifest!r} missing)"
        )
    DATASETS.import_from_location()
    cls = DATASETS.get(get_task(task).dataset)
    return cls(ann_file=Path(split_dir) / manifest, **kwargs)
