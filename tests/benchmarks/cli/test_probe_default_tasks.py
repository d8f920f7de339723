"""`probe` without --tasks probes the tasks whose ground truth the data has and names the ones it skips
(an imported pose-only split used to fail on its missing normal ground truth)."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks.cli.main import main
from sapiens2.datasets import data_tasks
from sapiens2.tasks import task_names


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("probe-tasks", 8, (64, 48), 4, root=tmp_path_factory.mktemp("synth"),
                                progress=False)


def _keep_only(split, tasks, dest):
    shutil.copytree(split, dest)
    info = json.loads((dest / "split.json").read_text())
    info["tasks"] = {t: m for t, m in info["tasks"].items() if t in tasks}
    (dest / "split.json").write_text(json.dumps(info))
    return dest


@pytest.mark.slow
def test_probe_defaults_to_the_tasks_the_data_has(synth, tmp_path, capsys):
    data = _keep_only(synth, {"seg"}, tmp_path / "seg_only")
    out = tmp_path / "out"
    assert main(["probe", "--backbone", "pixels", "--data", str(data), "--quick", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    skipped = [t for t in task_names() if t != "seg"]
    assert f"probe: tasks seg (the data's; skipped, no ground truth in {data}: {','.join(skipped)}" in err
    assert sorted(p.parent.name for p in out.rglob("seed0.json")) == ["seg"]


def test_train_and_test_folders_count_a_task_only_when_both_have_it(synth, tmp_path):
    _keep_only(synth, {"seg", "normal", "albedo"}, tmp_path / "d" / "train")
    _keep_only(synth, {"seg", "albedo", "pose"}, tmp_path / "d" / "test")
    assert data_tasks(tmp_path / "d") == [t for t in task_names() if t in ("seg", "albedo")]
    assert data_tasks(synth) == list(task_names())
    assert data_tasks(tmp_path) is None  # neither layout: the readers say what is missing


def test_data_without_any_task_is_an_error_naming_the_folder(synth, tmp_path, capsys):
    data = _keep_only(synth, set(), tmp_path / "none")
    code = main(["probe", "--backbone", "pixels", "--data", str(data), "--quick", "--out", str(tmp_path)])
    assert code == 1
    assert f"--data {data}: no ground truth of any task" in capsys.readouterr().err


@pytest.mark.slow
def test_run_with_data_defaults_to_its_tasks_too(synth, tmp_path, capsys):
    data = _keep_only(synth, {"seg"}, tmp_path / "seg_only")
    out = tmp_path / "o"
    assert main(["run", "--quick", "--data", str(data), "--backbones", "floor,pixels", "--no-mediapipe",
                 "--no-paper", "--out", str(out)]) == 0
    assert f"run: tasks seg (the data's; skipped, no ground truth in {data}" in capsys.readouterr().err
    assert {p.parent.name for p in (out / "results").rglob("seed0.json")} == {"seg"}
