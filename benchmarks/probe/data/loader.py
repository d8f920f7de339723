"""Probe samples read lazily, one batch at a time, each scene read once for all the tasks it serves.

The dense tasks of a split usually annotate the same scenes (the synthetic split: one image with its
seg, normal, pointmap and albedo maps); pose reads top-down crops of the people in them. A
:class:`SceneLoader` groups the requested tasks by the scenes they read (:attr:`SceneLoader.groups`:
tasks whose samples are the same images in the same order share a group) and yields, per group,
:class:`SceneBatch` objects: the batch's images resized to the protocol's input size and each task's
targets (:meth:`ProbeTask.targets` of the batch's samples). A scene is read once per pass and its
sample dict is shared by the tasks of its group; nothing of the split is held beyond the batches in
flight, so memory does not grow with the number of scenes.

Interface (what the streamed read-out consumes)::

    loader = SceneLoader(source, {"seg": seg_task, "pose": pose_task}, "train", protocol,
                         batch_size=8, num_workers=2)
    for group in loader.groups:               # e.g. ("seg",), ("pose",)
        n = loader.num_samples(group)         # known before any sample is read
        for batch in loader.batches(group):   # SceneBatch, in split order
            batch.positions                   # B positions in the split, 0..n-1
            batch.index, batch.ids            # dataset indices (evaluator keys) and sample ids
            batch.images                      # B x 3 x H x W float in [0, 1], H x W = input_size
            batch.targets["seg"]              # the task's targets dict for these B samples

``batches(group, rank=r, world=w)`` yields only every w-th batch from the r-th (a rank's shard).
With ``num_workers`` > 0 batches are read and their targets built in a ``torch.utils.data.DataLoader``
(one batch per work item, order kept). Checks as :func:`~benchmarks.probe.data.source.load_task_split`:
an empty split and a sample without the task's ground truth are errors naming the data and task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmarks.probe.data.batching import SceneBatch
from benchmarks.probe.data.loader_guard import describe_chunk, guarded_batches, read_batch
from benchmarks.probe.data.sample_cache import SampleCache, cache_key
from benchmarks.probe.data.source import DataSource, FolderData, as_data_source, stack_images
from sapiens2.datasets.base import ManifestDataset

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView
    from benchmarks.probe.tasks.base import ProbeTask




class _TaskSplit:
    """One task's split: a reader and the reader indices of the split (folder), or a sample list."""

    def __init__(self, source: DataSource, task: ProbeTask, split: str, protocol: ProtocolView, limit: int):
        self.task = task
        where = f"data {source.name} ({task.name}/{split})"
        if isinstance(source, FolderData):
            self.reader, self.keep = source.reader(task.name, split, protocol)
            self.samples = None
        else:
            self.reader, self.samples = None, source.load(task.name, split, protocol)
            self.keep = list(range(len(self.samples)))
        if not self.keep:
            raise ValueError(f"data {source.name}: the {task.name} {split!r} split is empty")
        if limit:
            self.keep = self.keep[:limit]
        self.where = where

    def __len__(self) -> int:
        return len(self.keep)

    def scene_keys(self) -> list | None:
        """What identifies each scene (image path, or sample id and image object), None if unknown."""
        if self.samples is not None:
            return [(self.samples[i].get("id", i), id(self.samples[i]["image"])) for i in self.keep]
        if isinstance(self.reader, ManifestDataset):
            return [str(self.reader.path(self.reader.records[i], "image")) for i in self.keep]
        return None


def _same_scenes(a: _TaskSplit, b: _TaskSplit) -> bool:
    ka = a.scene_keys()
    return ka is not None and ka == b.scene_keys()


class _Group:
    """Tasks reading the same scenes; reads scene ``p`` once and merges every task's ground truth."""

    def __init__(self, parts: list[_TaskSplit], input_size: Sequence[int], cache: SampleCache | None = None):
        self.parts, self.input_size, self.cache = parts, tuple(input_size), cache
        self.tasks = tuple(p.task.name for p in parts)

    def __len__(self) -> int:
        return len(self.parts[0])

    def sample(self, pos: int) -> dict:
        first = self.parts[0]
        if first.samples is not None:
            merged: dict = {}
            for p in self.parts:
                merged.update(p.samples[p.keep[pos]])
            return merged
        if len(self.parts) == 1 or not isinstance(first.reader, ManifestDataset):
            return first.reader[first.keep[pos]]
        i = first.keep[pos]
        _, common, img = first.reader._base_sample(i)  # the image, decoded once
        merged = {}
        for p in self.parts:
            merged.update(_read_with_image(p.reader, i, common, img))
        return merged

    def samples(self, positions: list[int]) -> list[dict]:
        """The samples at ``positions``: from the sample cache when it holds them (else read, then stored)."""
        got = None if self.cache is None else self.cache.load(positions)
        if got is None:
            got = [self.sample(p) for p in positions]
            if self.cache is not None:
                self.cache.store(positions, got)
        return got

    def batch(self, positions: list[int], with_targets: bool = True, with_images: bool = True) -> SceneBatch:
        samples = self.samples(positions)
        where = "/".join(self.tasks)
        return SceneBatch(
            positions=torch.tensor(positions, dtype=torch.int64),
            index=torch.tensor(
                [int(s.get("index", q)) for s, q in zip(samples, positions)], dtype=torch.int64
            ),
            ids=[str(s.get("id", q)) for s, q in zip(samples, positions)],
            images=stack_images(samples, self.input_size, where) if with_images else torch.zeros(0),
            targets={p.task.name: p.task.targets(samples) for p in self.parts} if with_targets else {},
        )


def _read_with_image(reader: ManifestDataset, i: int, common: dict, img: np.ndarray) -> dict:
    """``reader[i]`` with the scene's image already decoded (the reader reads its ground truth only).

    The reader's own record ``i`` is kept (its ground-truth paths); the image and its derived fields
    come from the group's first reader, which read the same image file.
    """

    def base(index: int) -> tuple[dict, dict, np.ndarray]:
        return reader.records[index], dict(common), img

    reader._base_sample = base  # shadows the method on this instance for one call
    try:
        return reader[i]
    finally:
        del reader._base_sample


class _Batches(Dataset):
    def __init__(self, group: _Group, chunks: list[list[int]], with_targets: bool, with_images: bool):
        self.group, self.chunks = group, chunks
        self.with_targets, self.with_images = with_targets, with_images

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, k: int) -> SceneBatch:
        return read_batch(self.group, self.chunks[k], self.with_targets, self.with_images)


class SceneLoader:
    """Lazy batches of one split for several tasks (see the module docstring for the interface).

    Args:
        source: a data folder or :class:`~benchmarks.probe.data.source.MemoryData`.
        tasks: ``{name: ProbeTask}``.
        split: the split name (``protocol.train_split`` or ``protocol.test_split``).
        protocol: the protocol (input size, hold-out rule).
        batch_size: scenes per batch.
        num_workers: DataLoader worker processes (0: read in this process).
        limit: keep the first ``limit`` samples of each task (0: all), as ``max_*_samples``.
        sample_cache: a folder keeping each batch's samples on disk
            (:mod:`~benchmarks.probe.data.sample_cache`; data folders only), so later runs over the same
            split, tasks and protocol read them back instead of decoding the files again; None: none.
    """

    def __init__(
        self,
        source: str | os.PathLike | DataSource,
        tasks: dict[str, ProbeTask],
        split: str,
        protocol: ProtocolView,
        batch_size: int = 8,
        num_workers: int = 0,
        limit: int = 0,
        sample_cache: str | os.PathLike | None = None,
    ):
        self.source = as_data_source(source)
        self.sample_cache = sample_cache
        self.batch_size, self.num_workers, self.limit = int(batch_size), int(num_workers), int(limit)
        self.tasks = tuple(tasks)
        parts = [_TaskSplit(self.source, t, split, protocol, limit) for t in tasks.values()]
        groups: list[list[_TaskSplit]] = []
        for p in parts:
            for g in groups:
                if _same_scenes(g[0], p):
                    g.append(p)
                    break
            else:
                groups.append([p])
        self._groups = {}
        for g in groups:
            names = tuple(q.task.name for q in g)
            cache = None
            if sample_cache is not None and isinstance(self.source, FolderData):
                key = cache_key(split, names, [self.source.content_hash(t, split) for t in names],
                                [protocol.protocol_id(t) for t in names], self.limit)
                cache = SampleCache(sample_cache, key)
            self._groups[names] = _Group(g, protocol.input_size, cache)
        for g in self._groups.values():  # checked before any work, as load_task_split does
            first = g.sample(0)
            for p in g.parts:
                p.task.check_samples([first], p.where)

    @property
    def groups(self) -> list[tuple[str, ...]]:
        """The scene groups: tuples of task names, each read in one pass."""
        return list(self._groups)

    def group_of(self, task: str) -> tuple[str, ...]:
        return next(g for g in self._groups if task in g)

    def num_samples(self, group: tuple[str, ...]) -> int:
        return len(self._groups[group])

    def batches(self, group: tuple[str, ...], rank: int = 0, world: int = 1, targets: bool = True,
                images: bool = True) -> Iterator[SceneBatch]:
        """Yield the group's :class:`SceneBatch` objects in split order (every ``world``-th from ``rank``).

        ``targets=False`` leaves :attr:`SceneBatch.targets` empty (a pass that needs the images only);
        ``images=False`` leaves :attr:`SceneBatch.images` empty (a pass over the ground truth only).
        """
        g = self._groups[group]
        n = len(g)
        chunks = [list(range(s, min(n, s + self.batch_size))) for s in range(0, n, self.batch_size)]
        chunks = chunks[rank::world]
        if self.num_workers <= 0:
            for c in chunks:
                yield read_batch(g, c, targets, images)
            return
        # a stuck worker ends the run after the loader timeout; a worker's error is raised as itself
        yield from guarded_batches(_Batches(g, chunks, targets, images), self.num_workers,
                                   partial(describe_chunk, g, chunks))
