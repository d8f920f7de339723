"""Loading the probe's train/test samples per task, with checks before any training starts.

Samples are the dicts documented in ``sapiens2/datasets/README.md`` (``index``, ``id``, ``image``
3 x H x W float in [0, 1], and the task's GT). A data source is either a folder read through the
task readers registered in ``sapiens2.registry.DATASETS``, or an in-memory :class:`MemoryData`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from benchmarks.probe.tasks import probe_task_class
from sapiens2.datasets import open_split
from sapiens2.datasets.identity import split_identity

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView
    from benchmarks.probe.tasks.base import ProbeTask


class MemoryData:
    """In-memory samples: ``{task: {split: [sample dict, ...]}}`` (tests and programmatic use).

    Args:
        samples: the samples by task and split.
        name: the data's name in records.
        vocabularies: ``{task: keypoint / label set}`` (a set, built-in name or JSON; a task left out: its
            default set).
    """

    def __init__(self, samples: dict[str, dict[str, list[dict]]], name: str = "memory",
                 vocabularies: dict[str, object] | None = None):
        self.samples, self.name = samples, name
        self.vocabularies = dict(vocabularies or {})

    def vocabulary(self, task: str, split: str, protocol: ProtocolView) -> object | None:
        """The keypoint / label set of ``task``'s GT (None: the task's default)."""
        return self.vocabularies.get(task)

    def load(self, task: str, split: str, protocol: ProtocolView) -> list[dict]:
        if task not in self.samples or split not in self.samples[task]:
            raise FileNotFoundError(
                f"data {self.name}: no {task!r} ground truth for split {split!r} "
                f"(has: { {t: sorted(s) for t, s in self.samples.items()} })"
            )
        return list(self.samples[task][split])

    def content_hash(self, task: str, split: str) -> str:
        h = hashlib.sha256()
        for s in self.samples.get(task, {}).get(split, []):
            for k in sorted(s):
                v = s[k]
                if torch.is_tensor(v):
                    h.update(v.detach().cpu().contiguous().numpy().tobytes())
                else:
                    h.update(repr(v).encode())
        return h.hexdigest()


class FolderData:
    """A dataset folder read through the task readers (``sapiens2.datasets.open_split``).

    Either ``DIR/<train_split>/`` and ``DIR/<test_split>/`` are split folders (each with
    ``split.json``), or ``DIR`` itself is one split folder and the protocol's hold-out rule applies:
    samples whose index ``i % holdout_every == holdout_every - 1`` are the test split.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.name = self.root.name
        if not self.root.is_dir():
            raise FileNotFoundError(f"--data {self.root}: no such folder")
        self._hashes: dict[tuple[Path, str], str] = {}
        self._readers: dict[tuple, object] = {}

    def _split_dir(self, split: str) -> tuple[Path, bool]:
        if (self.root / split / "split.json").is_file():
            return self.root / split, False
        if (self.root / "split.json").is_file():
            return self.root, True
        raise FileNotFoundError(
            f"--data {self.root}: neither {self.root / split / 'split.json'} nor "
            f"{self.root / 'split.json'} exists (make data with `sapiens2-bench data synth`)"
        )

    def reader(self, task: str, split: str, protocol: ProtocolView) -> tuple[Dataset, list[int]]:
        """(the task's reader, the reader indices of ``split`` in order): nothing read but manifests."""
        folder, holdout = self._split_dir(split)
        crops = probe_task_class(task).crops  # top-down crops are cut at the protocol's input size
        kwargs = {"input_size": (protocol.input_size[1], protocol.input_size[0])} if crops else {}
        key = (folder, task, tuple(sorted(kwargs.items())))
        if key not in self._readers:  # one reader per split folder (its manifest is read once)
            try:
                self._readers[key] = open_split(folder, task, **kwargs)
            except ValueError as e:  # DatasetError
                raise FileNotFoundError(
                    f"--data {self.root}: no {task} ground truth for split {split!r} ({e})"
                ) from e
        reader = self._readers[key]
        n = len(reader)
        if holdout:
            k = protocol.holdout_every
            is_test = split == protocol.test_split
            keep = [i for i in range(n) if (i % k == k - 1) == is_test]
        else:
            keep = list(range(n))
        return reader, keep

    def vocabulary(self, task: str, split: str, protocol: ProtocolView) -> object | None:
        """The keypoint / label set the split's reader names (``keypoint_set`` / ``label_set``; None)."""
        kind = probe_task_class(task).vocabulary_kind
        return getattr(self.reader(task, split, protocol)[0], kind, None) if kind else None

    def load(self, task: str, split: str, protocol: ProtocolView) -> list[dict]:
        reader, keep = self.reader(task, split, protocol)
        return [reader[i] for i in keep]

    def content_hash(self, task: str, split: str) -> str:
        """The split's identity for ``task``: every file of its folder and every file the task's manifest
        names elsewhere (``sapiens2.datasets.identity``; computed once per folder, task and object)."""
        folder, _ = self._split_dir(split)
        if (folder, task) not in self._hashes:
            self._hashes[(folder, task)] = split_identity(folder, tasks=[task])
        return self._hashes[(folder, task)]


# what the probe reads samples from
DataSource = MemoryData | FolderData


def as_data_source(data: str | os.PathLike | DataSource) -> DataSource:
    """Wrap a folder path (or pass through an in-memory source)."""
    if isinstance(data, (MemoryData, FolderData)):
        return data
    return FolderData(data)


def stack_images(samples: list[dict], size: tuple[int, int], where: str) -> torch.Tensor:
    """N x 3 x H x W images resized (bilinear) to ``size``; checks each is 3 x H x W in [0, 1]."""
    out = []
    for s in samples:
        im = torch.as_tensor(s["image"]).float()
        if im.dim() != 3 or im.shape[0] != 3:
            raise ValueError(
                f"{where}: sample {s.get('id', s.get('index'))} image has shape {tuple(im.shape)}, "
                "expected 3 x H x W"
            )
        if tuple(im.shape[-2:]) != tuple(size):
            im = F.interpolate(im[None], size=tuple(size), mode="bilinear", align_corners=False)[0]
        out.append(im)
    return torch.stack(out)


def sample_indices(samples: list[dict]) -> torch.Tensor:
    """Dataset index of every sample (its position when the reader gives none)."""
    return torch.tensor([int(s.get("index", i)) for i, s in enumerate(samples)], dtype=torch.int64)


def load_task_split(source: DataSource, task: ProbeTask, split: str, protocol: ProtocolView,
                    limit: int = 0) -> list[dict]:
    """Samples of one task/split, checked for the task's GT keys; ``limit`` > 0 keeps the first ones."""
    samples = source.load(task.name, split, protocol)
    if not samples:
        raise ValueError(f"data {source.name}: the {task.name} {split!r} split is empty")
    if limit:
        samples = samples[:limit]
    task.check_samples(samples, f"data {source.name} ({task.name}/{split})")
    return samples
