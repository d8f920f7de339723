"""Two writers of one output never both succeed: a probe or a pretraining run holds its folder's lock.

Deterministic: the second writer is started from inside the first one (or the lock is held by the
test), never raced against a clock.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe import api as probe_api  # noqa: E402
from sapiens2.output_lock import LOCK_NAME, OutputBusyError, output_lock  # noqa: E402
from sapiens2.records.results import read_record  # noqa: E402

SEG = ("seg",)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _record_folder(out: Path) -> Path:
    """The folder a probe of ``pixels`` locks: the backbone's (its tasks' records live below it)."""
    return out / "pixels"


def test_a_probe_into_a_locked_record_folder_stops_before_writing(tmp_path):
    folder = _record_folder(tmp_path)
    with output_lock(folder, "another probe"):
        with pytest.raises(OutputBusyError, match="another probe"):
            probe_api.run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
        assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]  # nothing of the second run


def test_a_second_probe_started_during_the_first_fails_and_the_first_keeps_its_numbers(tmp_path, monkeypatch):
    """The second probe (another dataset) starts while the first trains: it fails, the first's record holds
    the first's numbers."""
    from benchmarks.probe.train import body_stream

    train = body_stream.train_decoder  # the trained body's path (quick=True) on the streamed spine
    seen = {}

    def train_and_race(*args, **kwargs):
        if not seen:
            seen["second"] = "started"
            try:
                probe_api.run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=1), tmp_path,
                                    protocol="quick")
                seen["second"] = "exit 0"
            except OutputBusyError as e:
                seen["second"] = str(e)
        return train(*args, **kwargs)

    monkeypatch.setattr(body_stream, "train_decoder", train_and_race)
    (path,) = probe_api.run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
    assert "another run is writing into this folder" in seen["second"]
    monkeypatch.setattr(body_stream, "train_decoder", train)
    alone_out = tmp_path / "alone"
    (alone,) = probe_api.run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), alone_out,
                                   protocol="quick")
    assert read_record(path)["metrics"] == read_record(alone)["metrics"]
    assert not (path.parent.parent / LOCK_NAME).exists()  # released and removed


def test_the_lock_of_a_failed_run_is_released_and_leaves_no_folder(tmp_path):
    with pytest.raises(RuntimeError):
        with output_lock(tmp_path / "a" / "b", "x"):
            raise RuntimeError("boom")
    assert not (tmp_path / "a").exists()
    with output_lock(tmp_path / "a" / "b", "y"):  # free again
        pass


@pytest.mark.slow
def test_a_probe_process_into_a_folder_another_process_holds_exits_1(tmp_path):
    """Across processes: the test process holds the lock, a ``probe`` CLI process into the same folder fails
    before any work (flock is per open file, so this is what two real runs see)."""
    import os
    import subprocess

    from sapiens2.datasets.synth import generate_split

    root = Path(__file__).resolve().parents[2]
    data = generate_split(tmp_path / "data", n=4, seed=0, size=(64, 48))
    folder = _record_folder(tmp_path / "out")
    with output_lock(folder, "probe held-by-test"):
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.cli.main", "probe", "--backbone", "pixels", "--quick",
             "--tasks", "seg", "--data", str(data), "--out", str(tmp_path / "out")],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
            timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "another run is writing into this folder (probe held-by-test" in proc.stderr
