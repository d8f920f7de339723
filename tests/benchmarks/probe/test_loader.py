"""Lazy scene batches: the loader yields exactly today's samples and targets, reads each scene's image
once for all its dense tasks, shards by rank, and gives the same batches with DataLoader workers."""

from __future__ import annotations

import pytest
import torch

from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.source import FolderData, load_task_split, stack_images
from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.tasks import build_task

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("loader", n=6, size=(64, 48), seed=1, root=tmp_path_factory.mktemp("synth"))


def _protocol():
    return ProbeProtocol(input_size=(64, 48), holdout_every=3)


def _equal(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)


def test_loader_batches_equal_the_loaded_split(split):
    p = _protocol()
    tasks = {t: build_task(t, p) for t in TASKS}
    source = FolderData(split)
    loader = SceneLoader(source, tasks, "train", p, batch_size=3)
    # the dense tasks annotate the same images: one group; pose reads person crops
    assert sorted(loader.groups) == sorted([("pose",), ("seg", "normal", "pointmap", "albedo")])
    for group in loader.groups:
        batches = list(loader.batches(group))
        for t in group:
            samples = load_task_split(source, tasks[t], "train", p)
            assert loader.num_samples(group) == len(samples)
            ref = tasks[t].targets(samples)
            got = {k: torch.cat([b.targets[t][k] for b in batches]) for k in ref}
            assert _equal(ref, got), t
            assert torch.equal(torch.cat([b.images for b in batches]), stack_images(samples, p.input_size, t))
            assert [i for b in batches for i in b.ids] == [s["id"] for s in samples]
            assert torch.cat([b.index for b in batches]).tolist() == [s["index"] for s in samples]


def test_each_scene_image_is_read_once_for_its_dense_tasks(split, monkeypatch):
    import sapiens2.datasets.base as base

    p = _protocol()
    dense = ("seg", "normal", "pointmap", "albedo")
    loader = SceneLoader(FolderData(split), {t: build_task(t, p) for t in dense}, "test", p, batch_size=2)
    reads = []
    real = base.read_rgb
    monkeypatch.setattr(
        base, "read_rgb", lambda path, *a, **k: reads.append(str(path)) or real(path, *a, **k)
    )
    batches = list(loader.batches(dense))
    n = loader.num_samples(dense)
    assert n == sum(len(b.ids) for b in batches) and len(reads) == n and len(set(reads)) == n


def test_rank_shards_and_workers_give_the_same_batches(split):
    p = _protocol()
    tasks = {t: build_task(t, p) for t in ("seg", "albedo")}
    source = FolderData(split)
    plain = SceneLoader(source, tasks, "train", p, batch_size=1)
    group = plain.groups[0]
    ref = list(plain.batches(group))
    shards = [list(plain.batches(group, rank=r, world=2)) for r in (0, 1)]
    assert [b.ids for b in shards[0]] == [b.ids for b in ref[0::2]]
    assert [b.ids for b in shards[1]] == [b.ids for b in ref[1::2]]
    workers = list(SceneLoader(source, tasks, "train", p, batch_size=1, num_workers=2).batches(group))
    assert len(workers) == len(ref)
    for a, b in zip(ref, workers):
        assert a.ids == b.ids and torch.equal(a.images, b.images)
        assert all(_equal(a.targets[t], b.targets[t]) for t in tasks)


def test_missing_ground_truth_and_empty_split_are_errors_before_any_batch():
    from benchmarks.probe.data.source import MemoryData

    p = _protocol()
    seg = build_task("seg", p)
    bare = MemoryData(
        {"seg": {"train": [{"index": 0, "id": "a", "image": torch.zeros(3, 8, 8)}]}}, name="bare"
    )
    with pytest.raises(ValueError, match=r"data bare \(seg/train\): samples lack the seg ground truth"):
        SceneLoader(bare, {"seg": seg}, "train", p)
    empty = MemoryData({"seg": {"train": []}}, name="empty")
    with pytest.raises(ValueError, match="the seg 'train' split is empty"):
        SceneLoader(empty, {"seg": seg}, "train", p)
