"""The trained body's train split on disk: features and targets read back a few rows at a time.

A trained body iterates over its train split many times, so the streamed spine's single pass is not
enough; holding the split in RAM is what made memory grow with the images. During the train pass
(:func:`~benchmarks.probe.readout.stream.fit_group`, or :func:`spill_pass` without a read-out to fit)
:class:`TrainSpill` writes each sample's targets to ``<folder>/<task>/<position>.safetensors`` and
notes its image's content hash; the backbone's features land in the
:class:`~benchmarks.probe.features.store.FeatureStore`'s disk cache under that hash (the user's
``cache_dir``, or the run's scratch folder). Training then reads them through :class:`Rows`: a
row-indexable stand-in for a tensor, ``rows[idx]`` loads just those rows, so decoder training and
its evaluation code run unchanged on a split of any size. The oracle's and the floor's features are
made from the spilled targets the same way, row by row.

Example:
    >>> import torch
    >>> rows = Rows(3, (2,), torch.float32, lambda i: torch.full((2,), float(i)))
    >>> rows.shape, rows[torch.tensor([2, 0])].tolist()
    ((3, 2), [[2.0, 2.0], [0.0, 0.0]])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm.auto import tqdm

from benchmarks.probe.features.reference import floor_features, oracle_features
from benchmarks.probe.features.store import FeatureSet, FeatureStore, image_hash
from sapiens2 import distributed as dist_utils
from sapiens2.utils_io import atomic_write

if TYPE_CHECKING:
    from benchmarks.probe.data.batching import SceneBatch
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.readout.feature_streams import FeatureStream
    from benchmarks.probe.tasks.base import ProbeTask


class Rows:
    """N rows of one shape and dtype, each read by ``read(i)`` when indexed (nothing is held).

    Supports what decoder training and evaluation ask of a split's tensor: ``shape``, ``dtype``,
    ``device`` (where the rows read are put) and indexing by an index tensor, a list, an int or a slice.
    """

    def __init__(self, n: int, row_shape: tuple, dtype: torch.dtype, read: Callable[[int], torch.Tensor],
                 device: str | torch.device = "cpu"):
        self.n, self.row_shape, self.dtype, self.read = int(n), tuple(row_shape), dtype, read
        self.device = torch.device(device)

    @property
    def shape(self) -> tuple:
        return (self.n, *self.row_shape)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, idx: int | slice | list[int] | torch.Tensor) -> torch.Tensor:
        if isinstance(idx, int):
            return self._row(idx).to(self.device)
        if isinstance(idx, slice):
            idx = range(*idx.indices(self.n))
        idx = [int(i) for i in (idx.tolist() if isinstance(idx, torch.Tensor) else idx)]
        if not idx:
            return torch.zeros((0, *self.row_shape), dtype=self.dtype, device=self.device)
        return torch.stack([self._row(i) for i in idx]).to(self.device)

    def _row(self, i: int) -> torch.Tensor:
        if not -self.n <= i < self.n:
            raise IndexError(f"row {i} of {self.n}")
        row = self.read(i % self.n)
        if tuple(row.shape) != self.row_shape or row.dtype != self.dtype:
            raise ValueError(f"row {i}: {tuple(row.shape)} {row.dtype}, "
                             f"expected {self.row_shape} {self.dtype}")
        return row


class TrainSpill:
    """Spills one scene group's train targets to disk and remembers each position's image hash.

    Args:
        folder: where this group's files go (created; the caller removes it after the run).
        tasks: the group's trained tasks.
        hash_images: note each image's content hash (the key of its features in the store's cache;
            not needed for the oracle and the floor, whose features come from the targets).
    """

    def __init__(self, folder: Path, tasks: Iterable[str], hash_images: bool = True):
        self.folder, self.tasks, self.hash_images = Path(folder), tuple(tasks), hash_images
        self.hashes: dict[int, str] = {}
        self.spec: dict[str, dict] = {}  # task -> {key: (row shape, dtype)} of its targets
        for t in self.tasks:
            (self.folder / t).mkdir(parents=True, exist_ok=True)

    def add(self, batch: SceneBatch) -> None:
        """Write the targets of ``batch`` (a :class:`~benchmarks.probe.data.loader.SceneBatch`).

        The native scoring layout (``native_size``, ``native*``: maps of images not at the input
        size, padded to their batch's largest) is not spilled: only the test split is scored at the
        native size, and its padding depends on the batch, so its rows would not stack.
        """
        for j, pos in enumerate(batch.positions.tolist()):
            if self.hash_images:
                self.hashes[pos] = image_hash(batch.images[j])
            for t in self.tasks:
                tgt = batch.targets[t]
                row = {k: v[j].contiguous() for k, v in tgt.items() if not k.startswith("native")}
                spec = {k: (tuple(v.shape), v.dtype) for k, v in row.items()}
                first = self.spec.setdefault(t, spec)
                if spec != first:
                    raise ValueError(f"train spill: {t} targets of sample {batch.ids[j]!r} (position {pos}) "
                                     f"are {spec}, the first sample's {first}")
                path = self.folder / t / f"{pos}.safetensors"
                atomic_write(path, lambda tmp, r=row: save_file(r, tmp))

    def finish(self, n: int) -> None:
        """Merge what every rank spilled (ranks share the folder) and check all ``n`` rows are there."""
        parts = dist_utils.all_gather_object((self.hashes, self.spec))
        for hashes, spec in parts:
            self.hashes.update(hashes)
            for t, s in spec.items():
                self.spec.setdefault(t, s)
        missing = [t for t in self.tasks if t not in self.spec]
        for t in self.tasks:
            if t not in missing:
                gone = [p for p in range(n) if not (self.folder / t / f"{p}.safetensors").is_file()]
                missing += [f"{t}/{p}" for p in gone[:3]]
        if missing:
            raise RuntimeError(f"train spill {self.folder}: rows missing after the train pass: {missing}")
        self.n = n

    def targets(self, task: str, device: str = "cpu") -> dict:
        """The task's train targets: ``{key: Rows}`` reading ``<folder>/<task>/<position>.safetensors``."""

        def reader(key: str) -> Callable[[int], torch.Tensor]:
            def read(i: int) -> torch.Tensor:
                with safe_open(str(self.folder / task / f"{i}.safetensors"), framework="pt") as f:
                    return f.get_tensor(key)
            return read

        spec = self.spec[task]
        return {k: Rows(self.n, shape, dtype, reader(k), device) for k, (shape, dtype) in spec.items()}

    def backbone_features(self, store: FeatureStore, image_size: Sequence[int],
                          device: str = "cpu") -> FeatureSet:
        """The train features from ``store``'s disk cache, by the spilled image hashes."""
        if store.disk is None:
            raise ValueError("train spill: the feature store has no disk cache to read the features from")
        if len(self.hashes) != self.n:
            raise RuntimeError(f"train spill {self.folder}: {len(self.hashes)} image hashes "
                               f"for {self.n} rows")
        first = store.disk.read(self.hashes[0])
        if first is None:
            raise RuntimeError(f"train spill: the features of row 0 are not in {store.disk.folder}")

        def part(k: int) -> Callable[[int], torch.Tensor]:
            def read(i: int) -> torch.Tensor:
                got = store.disk.read(self.hashes[i])
                if got is None:
                    raise RuntimeError(f"train spill: the features of row {i} left {store.disk.folder}")
                return got[k]
            return read

        feats = Rows(self.n, tuple(first[0].shape), first[0].dtype, part(0), device)
        cls = None if first[1] is None else Rows(self.n, tuple(first[1].shape), first[1].dtype, part(1),
                                                 device)
        fs = store.feature_set(first[0][None], None, image_size)
        return FeatureSet(feats, cls, fs.patch_size, fs.valid_frac, fs.image_size)

    def reference_features(self, kind: str, task: ProbeTask, protocol: ProbeProtocol,
                           device: str = "cpu") -> FeatureSet:
        """The oracle's (``kind="oracle"``) or the floor's features, made from the spilled targets."""
        tgt = self.targets(task.name)

        def make(rows: dict) -> FeatureSet:
            if kind == "floor":
                return floor_features(task, rows, protocol)
            return oracle_features(task, rows, protocol)

        first = make({k: v[[0]] for k, v in tgt.items()})

        def part(name: str) -> Callable[[int], torch.Tensor]:
            def read(i: int) -> torch.Tensor:
                return getattr(make({k: v[[i]] for k, v in tgt.items()}), name)[0]
            return read

        feats = Rows(self.n, tuple(first.feats.shape[1:]), first.feats.dtype, part("feats"), device)
        cls = None if first.cls is None else Rows(self.n, tuple(first.cls.shape[1:]), first.cls.dtype,
                                                  part("cls"), device)
        return FeatureSet(feats, cls, first.patch_size, first.valid_frac, first.image_size)


def spill_pass(loader: SceneLoader, group: tuple[str, ...], spill: TrainSpill, stream: FeatureStream,
               desc: str = "train") -> float:
    """The train pass without a read-out to fit (``shortcut="none"``): features into the store's disk
    cache (a backbone stream) and targets into ``spill``. Returns its seconds."""
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    t0 = time.perf_counter()
    bar = tqdm(total=loader.num_samples(group), desc=desc, unit="img", disable=rank != 0, leave=False,
               mininterval=1.0)
    for batch in loader.batches(group, rank, world):
        if stream.shared:
            stream(batch)
        spill.add(batch)
        bar.update(len(batch.positions) * world)
    bar.close()
    return time.perf_counter() - t0
