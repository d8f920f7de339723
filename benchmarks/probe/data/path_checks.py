"""Checks of the paths a probe writes against the data it reads, before any work.

A split's identity is the content of every file under its folder (``sapiens2.datasets.identity``), so
anything a run writes inside a split folder (its sample cache, feature cache or records) changes
that identity: the next identical run would find "another dataset" and refuse its own records. Such
a path is refused up front, naming the flag, the path and the split folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.probe.data.source import DataSource

__all__ = ["check_outputs_outside_data"]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_outputs_outside_data(source: DataSource, splits: Iterable[str],
                               outputs: dict[str, str | os.PathLike | None]) -> None:
    """Refuse output paths inside a split folder the run reads.

    Args:
        source: the run's data source (a :class:`~benchmarks.probe.data.source.FolderData`; other sources
            have no folder and pass).
        splits: the split names the run reads (train and test).
        outputs: ``{flag: path}`` of what the run writes (None: not used).

    Raises:
        ValueError: an output inside a split folder (names the flag, the path and the folder).
    """
    split_dir = getattr(source, "_split_dir", None)
    if split_dir is None:
        return
    folders = set()
    for split in splits:
        try:
            folders.add(split_dir(split)[0].resolve())
        except FileNotFoundError:  # reported, with its own message, where the split is read
            continue
    for flag, path in outputs.items():
        if path is None:
            continue
        where = Path(path).resolve()
        for folder in sorted(folders):
            if _inside(where, folder):
                raise ValueError(
                    f"{flag} {path} is inside the split folder {folder} of --data: what the run writes "
                    "there would change the split's content hash, so the next identical run would find "
                    "another dataset; give a path outside it"
                )
