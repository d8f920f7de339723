"""A sixth task needs no central file: a plug-in registers its task spec, reader, evaluator and probe
task (``tests/_support/_toy_task.py``), and the task appears in the probe run, its records, the leaderboard
tables and the report, while the five tasks' protocol ids stay as they are."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.protocol import ProbeProtocol, default_protocol, quick_protocol  # noqa: E402
from benchmarks.probe.tasks import probe_task_names  # noqa: E402
from sapiens2.tasks import task_names  # noqa: E402

FIVE = ("pose", "seg", "normal", "pointmap", "albedo")


@pytest.fixture
def toy():
    # Imported before the toy registers, as a user's run would: the catalog and the probe's headline
    # table derive a task's metrics when asked, so a task registered later is seen.
    import benchmarks.cli.main  # noqa: F401
    import benchmarks.probe.api  # noqa: F401
    import leaderboard.build  # noqa: F401

    ids_before = default_protocol().protocol_ids()
    sys.modules.pop("_toy_task", None)
    module = importlib.import_module("_toy_task")
    try:
        yield module, ids_before
    finally:
        module.unregister()
        sys.modules.pop("_toy_task", None)
    assert module.NAME not in task_names() and module.NAME not in probe_task_names()


def test_a_registered_task_is_everywhere_a_task_is_listed(toy):
    module, ids_before = toy
    from evaluators.registry import build_evaluator
    from sapiens2.records.schema import result_schema

    name = module.NAME
    assert task_names() == (*FIVE, name) and probe_task_names() == (*FIVE, name)
    p = default_protocol()
    assert list(p.tasks) == [*FIVE, name] and p.task(name).clip == 1.0 and p.task(name).loss == "grey_l1"
    assert type(build_evaluator(name)).__name__ == "ToyGreyEvaluator"
    assert result_schema()["properties"]["task"]["enum"][-1] == name
    # a new task changes no other task's protocol id
    assert {t: p.protocol_id(t) for t in FIVE} == ids_before
    # and its own knob only its own id
    q = p.replace(tasks={name: {"clip": 0.5}})
    assert q.protocol_id(name) != p.protocol_id(name)
    assert {t: q.protocol_id(t) for t in FIVE} == ids_before


def test_a_toy_task_runs_through_reader_probe_records_tables_and_report(toy, tmp_path):
    module, _ = toy
    from benchmarks.probe.api import run_probe
    from leaderboard.build import build_site
    from leaderboard.tables import group_tables, records_to_frame
    from sapiens2.records.results import load_records, read_record

    name = module.NAME
    scenes = make_toy_data(n_train=8, n_test=4).samples["albedo"]
    data = tmp_path / "data"
    for split in ("train", "test"):
        module.write_split(data / split, scenes[split])
    q = quick_protocol()
    protocol = q.replace(tasks={name: {"decoder": "linear"}})
    out = tmp_path / "results"
    paths = {bb: run_probe(bb, [name], data, out, protocol=protocol) for bb in ("pixels", "gt-oracle")}

    # records: the toy's own protocol id, in its own folder, validated on read (schema + id)
    pid = protocol.protocol_id(name)
    recs = {}
    for bb, (path,) in paths.items():
        assert path == out / bb / pid / name / "seed0.json"
        rec = read_record(path)
        assert rec["task"] == name and rec["protocol"]["protocol_id"] == pid
        assert list(rec["config"]["protocol"]["tasks"]) == [name]
        assert rec["dataset"]["num_samples"] == 4
        recs[bb] = rec
    # features = the ground truth: the linear read-out reproduces it, the pixels do not
    assert recs["gt-oracle"]["metrics"]["grey_mae"] < 1e-3 < recs["pixels"]["metrics"]["grey_mae"]
    # its declared metric is an interval metric and ranks lower-is-better, like any built-in one
    from leaderboard.catalog import headline_metric

    assert "grey_mae" in recs["pixels"]["intervals"]["bounds"]
    assert headline_metric(name).key == "grey_mae" and headline_metric(name).higher_is_better is False

    # the leaderboard table of the toy task under its protocol
    tables = [t for t in group_tables(records_to_frame(load_records([out]))) if t.task == name]
    assert [t.protocol_key for t in tables] == [f"probe:{pid}"]
    rows = tables[0].rows.set_index("model")
    assert rows.loc["pixels", "grey MAE"] == pytest.approx(recs["pixels"]["metrics"]["grey_mae"])

    # and the report
    site = build_site([out], tmp_path / "site")
    md = Path(site["markdown"]).read_text(encoding="utf-8")
    assert name in md and pid.rsplit("-", 1)[-1] in md and "grey MAE" in md
    assert f"{recs['pixels']['metrics']['grey_mae']:.3g}"[:4] in md


def test_show_protocol_prints_the_toy_tasks_id_and_knobs(toy, capsys):
    module, _ = toy
    from benchmarks.cli.main import main

    assert main(["probe", "--show-protocol"]) == 0
    shown = json.loads(capsys.readouterr().out)["per_task"][module.NAME]
    p = default_protocol()
    assert shown["protocol_id"] == p.protocol_id(module.NAME)
    assert shown["covers"]["tasks"] == {module.NAME: {"decoder": "linear", "output_stride": 1, "clip": 1.0}}
    assert ProbeProtocol.from_dict(shown["covers"]).protocol_id(module.NAME) == shown["protocol_id"]
