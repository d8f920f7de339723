"""The sample cache: samples round-trip exactly, a warm cache reads no data file and gives the same
batches and records, its key follows the data, the protocol and the limit, and a bad entry is an error
naming it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.probe.api import RunOptions, run_probe
from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.sample_cache import SampleCache, SampleCacheError
from benchmarks.probe.data.source import FolderData
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.tasks import build_task

DENSE = ("seg", "normal", "pointmap", "albedo")


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("cache", n=6, size=(64, 48), seed=2, root=tmp_path_factory.mktemp("synth"))


def _protocol(**changes):
    fields = {"input_size": (64, 48), "holdout_every": 3, "bootstrap_resamples": 50, **changes}
    return default_protocol().replace(**fields)


def _same(a, b) -> bool:
    """Equal values of equal types (tensors and arrays: dtype, shape and every value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def test_samples_round_trip_exactly(tmp_path):
    g = torch.Generator().manual_seed(0)
    sample = {
        "id": "scene-7", "index": 7, "score": 0.1 + 0.2, "nan": float("nan"), "none": None, "flag": True,
        "image": torch.rand(3, 5, 4, generator=g), "label": torch.randint(0, 29, (5, 4), generator=g),
        "mask": torch.rand(5, 4, generator=g) > 0.5, "u8": torch.randint(0, 255, (2, 2), dtype=torch.uint8),
        "half": torch.rand(2, generator=g).half(), "array": np.arange(6, dtype=np.int32).reshape(2, 3),
        "f64": np.linspace(0, 1, 5), "scalar": np.float32(1.5), "size": (5, 4),
        "crop": {"center": torch.tensor([1.0, 2.0]), "input_size": (4, 5), "nested": [1, (2, 3), {"k": "v"}]},
        "__tensor__": "a key that looks like a tag",
    }
    cache = SampleCache(tmp_path, "k")
    assert cache.load([3]) is None
    cache.store([3], [sample])
    (got,) = SampleCache(tmp_path, "k").load([3])
    assert _same(got, sample)
    assert got["size"] == (5, 4) and isinstance(got["crop"]["nested"][1], tuple)


def test_a_value_the_cache_cannot_store_is_an_error_naming_it(tmp_path):
    with pytest.raises(SampleCacheError, match=r"0\.meta\.when is a datetime"):
        import datetime

        SampleCache(tmp_path, "k").store([0], [{"meta": {"when": datetime.datetime(2026, 1, 1)}}])
    assert not list((tmp_path / "k").glob("*.safetensors"))  # nothing half-written


def _batches(loader):
    return {g: list(loader.batches(g)) for g in loader.groups}


def _equal_batches(a, b) -> None:
    assert a.keys() == b.keys()
    for g in a:
        assert len(a[g]) == len(b[g])
        for x, y in zip(a[g], b[g]):
            assert x.ids == y.ids and torch.equal(x.index, y.index) and torch.equal(x.positions, y.positions)
            assert torch.equal(x.images, y.images)
            assert _same(x.targets, y.targets)


def test_a_warm_cache_gives_the_same_batches_and_decodes_no_file(split, tmp_path, monkeypatch):
    import benchmarks.probe.data.loader as loader_module
    import sapiens2.datasets.base as base

    p = _protocol()
    tasks = {t: build_task(t, p) for t in ("pose", *DENSE)}
    plain = _batches(SceneLoader(FolderData(split), tasks, "train", p, batch_size=2))
    cold = _batches(SceneLoader(FolderData(split), tasks, "train", p, batch_size=2, sample_cache=tmp_path))
    files = sorted(tmp_path.rglob("*.safetensors"))
    assert len(files) == sum(len(v) for v in plain.values())  # one file per batch
    warm_loader = SceneLoader(FolderData(split), tasks, "train", p, batch_size=2, sample_cache=tmp_path)

    def refuse(*a, **k):
        raise AssertionError("a data file was decoded with a warm cache")

    monkeypatch.setattr(base, "read_rgb", refuse)
    monkeypatch.setattr(loader_module._Group, "sample", refuse)  # the reader of every scene and crop
    warm = _batches(warm_loader)
    _equal_batches(plain, cold)
    _equal_batches(plain, warm)


def test_the_key_follows_the_data_the_protocol_and_the_limit(split, tmp_path):
    p = _protocol()

    def folders(data, protocol, limit=0):
        loader = SceneLoader(FolderData(data), {t: build_task(t, protocol) for t in DENSE}, "train", protocol,
                             sample_cache=tmp_path, limit=limit)
        return {g.cache.dir for g in loader._groups.values()}

    base_key = folders(split, p)
    assert folders(split, p) == base_key  # the same data, protocol and limit: the same entries
    assert folders(split, p, limit=2).isdisjoint(base_key)
    assert folders(split, _protocol(input_size=(32, 24))).isdisjoint(base_key)
    other = tmp_path / "copy"
    shutil.copytree(split, other)
    label = next(iter(sorted(Path(other).rglob("*.png"))))
    label.write_bytes(label.read_bytes() + b"\0")  # one byte more in one file
    assert folders(other, p).isdisjoint(base_key)


def test_a_corrupt_entry_is_an_error_naming_it(split, tmp_path):
    p = _protocol()
    tasks = {"seg": build_task("seg", p)}
    cold = SceneLoader(FolderData(split), tasks, "train", p, batch_size=2, sample_cache=tmp_path)
    list(cold.batches(("seg",)))
    entry = sorted(tmp_path.rglob("*.safetensors"))[0]
    entry.write_bytes(entry.read_bytes()[:100])
    loader = SceneLoader(FolderData(split), tasks, "train", p, batch_size=2, sample_cache=tmp_path)
    with pytest.raises(SampleCacheError, match="unreadable") as e:
        list(loader.batches(("seg",)))
    assert str(entry) in str(e.value) and "delete" in str(e.value)


@pytest.mark.slow
def test_records_do_not_depend_on_the_cache(split, tmp_path):
    """pixels on all five tasks: no cache, a cold cache and a warm cache write the same metrics."""
    p = _protocol()
    metrics = []
    for name, cache in (("none", None), ("cold", tmp_path / "c"), ("warm", tmp_path / "c")):
        paths = run_probe("pixels", ("pose", *DENSE), split, tmp_path / name, protocol=p,
                          options=RunOptions(sample_cache=cache))
        metrics.append({Path(q).parent.name: json.loads(Path(q).read_text())["metrics"] for q in paths})
    assert len(metrics[0]) == 5
    assert metrics[0] == metrics[1] == metrics[2]


def test_the_content_hash_is_remembered_only_for_unchanged_files(tmp_path, monkeypatch):
    import os
    import time

    import sapiens2.records.provenance as provenance

    root = tmp_path / "data"
    root.mkdir()
    f = root / "a.bin"
    f.write_bytes(b"one")
    old = time.time() - 60
    os.utime(f, (old, old))  # older than the clock's granularity: remembered
    first = provenance.dataset_content_hash(root)

    def no_read(*a, **k):
        raise AssertionError("an unchanged file was read again")

    monkeypatch.setattr(provenance, "open", no_read, raising=False)
    assert provenance.dataset_content_hash(root) == first
    monkeypatch.undo()
    f.write_bytes(b"two")  # same size; its modification time is put back, its change time is not
    os.utime(f, (old, old))
    second = provenance.dataset_content_hash(root)
    assert second != first
    f.write_bytes(b"six")  # just written (racy): hashed again on the next call too
    assert provenance.dataset_content_hash(root) != second


def test_the_main_job_sample_cache_is_locked_and_emptied(tmp_path):
    from benchmarks.mainjob import _job_sample_cache
    from sapiens2.output_lock import OutputBusyError

    stale = tmp_path / ".samples" / "train-seg-old"
    stale.mkdir(parents=True)
    (stale / "0-8.safetensors").write_bytes(b"x")
    with _job_sample_cache(tmp_path) as folder:
        assert folder == tmp_path / ".samples" and not stale.exists()  # a killed job's leftovers go first
        (folder / "k").mkdir(parents=True)
        (folder / "k" / "0-2.safetensors").write_bytes(b"y")
        with pytest.raises(OutputBusyError):
            with _job_sample_cache(tmp_path):
                pass
        assert (folder / "k" / "0-2.safetensors").is_file()  # the refused second job removed nothing
    assert not any(p.suffix == ".safetensors" for p in tmp_path.rglob("*"))
