"""Loader workers cannot hang a run: a stopped worker ends it within the loader timeout with a message
naming the worker and its files; a worker's error is the project's one-line error, as without workers."""

from __future__ import annotations

import os
import signal
import time

import pytest

from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.loader_guard import TIMEOUT_ENV, LoaderTimeoutError, loader_timeout
from benchmarks.probe.data.source import FolderData
from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.tasks import build_task
from sapiens2.datasets.dense import SegDataset
from sapiens2.datasets.io import DatasetError

STOPPED_AT = 3  # the reader index at which a worker stops (SIGSTOP to itself)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("timeout", n=6, size=(64, 48), seed=2, root=tmp_path_factory.mktemp("synth"))


def _loader(split, workers: int) -> SceneLoader:
    p = ProbeProtocol(input_size=(64, 48), holdout_every=3)
    return SceneLoader(FolderData(split), {"seg": build_task("seg", p)}, "train", p, batch_size=1,
                       num_workers=workers)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose (its parent has not reaped it yet)
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] != "Z"


def test_a_stopped_worker_ends_the_run_within_the_timeout(split, monkeypatch):
    loader = _loader(split, workers=2)  # built before the patch: its first-sample check reads index 0
    original = SegDataset.__getitem__

    def stop_at(self, index):
        if index == STOPPED_AT:  # a stand-in for a read that never returns (a hung network mount)
            time.sleep(1)  # the batch this worker read before is sent on by its queue's thread
            os.kill(os.getpid(), signal.SIGSTOP)
        return original(self, index)

    monkeypatch.setattr(SegDataset, "__getitem__", stop_at)  # the forked workers inherit it
    monkeypatch.setenv(TIMEOUT_ENV, "3")
    (group,) = loader.groups
    t0 = time.monotonic()
    got = []
    with pytest.raises(LoaderTimeoutError) as err:
        for batch in loader.batches(group):
            got.append(batch.ids)
    took = time.monotonic() - t0 - 1
    msg = str(err.value)
    # train positions 0, 1 are reader indices 0, 1; position 2 is index 3 (every 3rd is held out)
    assert len(got) == 2 and took < 3 + 20, (got, took, msg)
    image = str(loader._groups[group].parts[0].reader.path(
        loader._groups[group].parts[0].reader.records[STOPPED_AT], "image"))
    assert "worker 0 (pid " in msg and "sent nothing for 3 s" in msg and "read batch 2 of" in msg, msg
    assert image in msg and "seg/train" in msg and TIMEOUT_ENV in msg, msg
    pid = int(msg.split("(pid ")[1].split(")")[0])
    assert not _alive(pid)  # the stopped worker was ended, not left behind


def test_a_worker_error_is_the_one_line_error_of_a_run_without_workers(split, tmp_path):
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(split, broken)
    target = sorted((broken / "images").iterdir())[STOPPED_AT]
    target.write_bytes(target.read_bytes()[:40])  # a truncated PNG
    messages = []
    for workers in (0, 2):
        loader = _loader(broken, workers)
        (group,) = loader.groups
        with pytest.raises(DatasetError) as err:
            list(loader.batches(group))
        messages.append(str(err.value))
    assert messages[0] == messages[1] and target.name in messages[1]
    assert "\n" not in messages[1] and "Traceback" not in messages[1] and "worker process" not in messages[1]


def test_the_timeout_setting(monkeypatch):
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert loader_timeout() == 600
    monkeypatch.setenv(TIMEOUT_ENV, "0")
    assert loader_timeout() == 0
    for bad in ("-1", "soon", "inf", "nan"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=TIMEOUT_ENV):
            loader_timeout()
