"""Ranks of a distributed probe that run different things stop before any fit, every rank with a
message naming the differing field and the ranks (2 CPU processes under torchrun, gloo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.probe.records.rank_agreement import mismatch_message

ROOT = Path(__file__).resolve().parents[3]
WORKER = ROOT / "tests" / "_support" / "_rank_agreement_worker.py"


@pytest.fixture(scope="module")
def two_splits(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny synthetic splits of other content (another seed)."""
    from sapiens2.datasets.synth import generate_split

    root = tmp_path_factory.mktemp("ranks")
    return tuple(generate_split(root / f"d{seed}", n=6, seed=seed, size=(64, 48), progress=False)
                 for seed in (0, 1))


def _torchrun(tmp_path: Path, data0, tasks0, data1, tasks1) -> subprocess.CompletedProcess:
    torchrun = Path(sys.executable).with_name("torchrun")
    assert torchrun.is_file(), f"torchrun (installed with torch) not found next to {sys.executable}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", str(WORKER), str(tmp_path / "out"),
           str(data0), tasks0, str(data1), tasks1]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def _records(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "out").rglob("seed*.json"))


@pytest.mark.slow
@pytest.mark.ddp
def test_ranks_on_other_data_stop_naming_the_data_and_ranks(tmp_path, two_splits):
    proc = _torchrun(tmp_path, two_splits[0], "seg", two_splits[1], "seg")
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "do not run the same probe" in text and "data.seg.train" in text, text[-3000:]
    assert "rank 0:" in text and "rank 1:" in text
    assert not _records(tmp_path)  # stopped before any fit: nothing mixed was written


@pytest.mark.slow
@pytest.mark.ddp
def test_ranks_with_other_tasks_stop_naming_the_task_lists(tmp_path, two_splits):
    proc = _torchrun(tmp_path, two_splits[0], "seg", two_splits[0], "seg,normal")
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "tasks [the task list (--tasks)] differs" in text, text[-3000:]
    assert '["seg"]' in text and '["seg", "normal"]' in text
    assert "Received data size" not in text and not _records(tmp_path)


def test_the_message_names_each_differing_field_and_who_holds_what():
    base = {"tasks": ["seg"], "seeds": [0], "data": {"seg": {"train": "a" * 64, "test": "a" * 64}},
            "protocol": {"seg": "p1"}, "backbone": {"spec": "x", "weights_sha256": "w1"}}
    assert mismatch_message([base, base, base]) is None
    other = {**base, "backbone": {"spec": "x", "weights_sha256": "w2"}}
    msg = mismatch_message([base, base, other])
    assert "backbone.weights_sha256" in msg and "ranks 0, 1: \"w1\"" in msg and "rank 2: \"w2\"" in msg
    assert "data" not in msg.split("differs")[0]
