"""A task written outside the repository (docs/examples/depth_task.py, the example of
docs/adding_a_task.md) goes through every command: ``data synth`` writes its ground truth, ``probe``
runs it, and ``leaderboard validate``, ``leaderboard build`` and ``compare`` read its records without
its code, from the metric declarations the records carry. Its oracle is scored against each test
image's native-size ground truth, never a resized copy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.cli.main import build_parser, main
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.tasks.base import resize_masked

EXAMPLE = Path(__file__).resolve().parents[4] / "docs" / "examples" / "depth_task.py"
NATIVE, INPUT = (80, 60), (64, 48)  # the split's image size and the read-out's input size
BACKBONES = ("gt-oracle", "floor", "pixels")


def unload_depth() -> None:
    """Remove everything the example registered, and what its records declared, as if never loaded."""
    from benchmarks.probe.tasks import unregister_probe_task
    from evaluators.registry import EVALUATORS
    from sapiens2.records.declared import forget
    from sapiens2.registry import DATASETS
    from sapiens2.tasks import unregister_task

    unregister_task("depth")
    unregister_probe_task("depth")
    DATASETS.module_dict.pop("DepthDataset", None)
    EVALUATORS.module_dict.pop("DepthEvaluator", None)
    sys.modules.pop("depth_task", None)
    forget("depth")


def _records(out: Path) -> dict[str, dict]:
    return {bb: json.loads(next((out / bb).rglob("depth/seed0.json")).read_text()) for bb in BACKBONES}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """A synthetic split with the plug-in's ground truth, and the plug-in probed on it by three backbones."""
    root = tmp_path_factory.mktemp("depth")
    split, out = root / "split", root / "out"
    protocol = root / "protocol.json"
    protocol.write_text(json.dumps({"input_size": list(INPUT), "bootstrap_resamples": 50}))
    try:
        assert main(["--include", str(EXAMPLE), "data", "synth", "--generator", "procedural",
                     "--out", str(split), "--n", "12", "--size", f"{NATIVE[0]}x{NATIVE[1]}"]) == 0
        for bb in BACKBONES:  # --include after the subcommand too
            assert main(["probe", "--include", str(EXAMPLE), "--backbone", bb, "--tasks", "depth",
                         "--data", str(split), "--protocol", str(protocol), "--out", str(out)]) == 0
    finally:
        unload_depth()
    yield split, out
    unload_depth()


def test_the_plugin_probes_and_its_records_describe_themselves(probed):
    split, out = probed
    assert json.loads((split / "split.json").read_text())["tasks"]["depth"] == "depth.json"
    recs = _records(out)
    for rec in recs.values():
        decl = rec["metric_decls"]["abs_rel"]
        assert rec["schema_minor"] == 1 and decl["headline"] and decl["higher_is_better"] is False
        assert decl["scale"] == 100.0 and decl["interval"] and "abs_rel" in rec["intervals"]["bounds"]
        assert rec["notes"].startswith("closed-form linear read-out (ridge on the train features, penalty")
        assert "final train loss" not in rec["notes"]
    oracle, floor, pixels = (recs[b]["metrics"]["abs_rel"] for b in BACKBONES)
    assert oracle < floor and oracle < pixels


def test_validate_build_and_compare_read_the_records_without_the_plugin(probed, tmp_path, capsys):
    _, out = probed
    from sapiens2.tasks import task_names

    assert "depth" not in task_names()  # the plug-in is not loaded: only its records say what depth is
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.startswith("ok ") and "(depth, " in line for line in lines)
    assert main(["leaderboard", "build", str(out), "--out", str(tmp_path / "site"), "--no-figures"]) == 0
    report = (tmp_path / "site" / "leaderboard.md").read_text()
    assert "depth" in report and "AbsRel %" in report
    capsys.readouterr()
    assert main(["compare", str(out), "pixels", "floor"]) == 0
    shown = capsys.readouterr().out
    assert "depth" in shown and "AbsRel % (lower is better)" in shown


def _depths(split: Path, index: list[int]) -> list[torch.Tensor]:
    return [torch.from_numpy(np.load(split / "depth" / f"{i:06d}.npy")) for i in index]


def _abs_rel(preds: list[torch.Tensor], gts: list[torch.Tensor]) -> float:
    num = sum(float(((p - g).abs() / g.clamp_min(1e-6))[g > 0].double().sum()) for p, g in zip(preds, gts))
    return num / sum(int((g > 0).sum()) for g in gts)


def test_the_oracle_is_scored_on_the_native_ground_truth(probed):
    """The oracle reproduces the read-out's targets at the input size exactly (the train-split prior
    where the resized mask is empty); upsampled to each test image's own size and scored against that
    image's ground truth, its AbsRel is what this test computes from the files, not the near-zero
    AbsRel against the resized ground truth."""
    split, out = probed
    every = default_protocol().holdout_every
    train = [i for i in range(12) if i % every != every - 1]
    test = [i for i in range(12) if i % every == every - 1]
    resized = [resize_masked(d[None], d > 0, INPUT) for d in _depths(split, train)]
    num = sum(v[0] * k for v, k in resized)
    den = sum(k.double() for _, k in resized)
    prior = torch.where(den > 0, num / den.clamp_min(1e-12), torch.zeros_like(num))
    native = _depths(split, test)

    def upsampled(x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x[None, None].float(), size=NATIVE, mode="bilinear", align_corners=False)[0, 0]

    test_in = [resize_masked(d[None], d > 0, INPUT) for d in native]
    oracle = [upsampled(torch.where(k, v[0], prior.float())) for v, k in test_in]
    recs = _records(out)
    expected = _abs_rel(oracle, native)
    assert recs["gt-oracle"]["metrics"]["abs_rel"] == pytest.approx(expected, rel=1e-3)
    against_resized = _abs_rel([torch.where(k, v[0], prior.float()) for v, k in test_in],
                               [v[0] * k for v, k in test_in])
    assert against_resized < expected / 50  # what scoring a resized ground truth would have reported
    floor = _abs_rel([upsampled(prior) for _ in native], native)
    assert recs["floor"]["metrics"]["abs_rel"] == pytest.approx(floor, rel=1e-6)


def test_data_derive_writes_the_plugins_ground_truth_into_an_existing_split(tmp_path):
    split = tmp_path / "split"
    assert main(["data", "synth", "--generator", "procedural", "--out", str(split), "--n", "3",
                 "--size", "48x32"]) == 0
    assert "depth" not in json.loads((split / "split.json").read_text())["tasks"]
    try:
        assert main(["data", "derive", str(split), "--task", "depth", "--include", str(EXAMPLE)]) == 0
    finally:
        unload_depth()
    records = json.loads((split / "depth.json").read_text())["records"]
    assert [r["id"] for r in records] == ["000000", "000001", "000002"]
    for r in records:
        points = np.load(split / "pointmap" / f"{r['id']}.npy")
        mask = np.asarray(__import__("PIL.Image").Image.open(split / "mask" / f"{r['id']}.png")) > 0
        assert r["image"] == f"images/{r['id']}.png"
        np.testing.assert_array_equal(np.load(split / r["depth"]), np.where(mask, points[..., 2], 0))


def test_the_tasks_default_is_computed_after_the_include(monkeypatch):
    from benchmarks.cli.main import load_plugins

    try:
        load_plugins(["--include", str(EXAMPLE)])
        # the default is resolved at run time from the data's tasks, among the tasks known after --include
        from benchmarks.probe.tasks import probe_task_names

        assert build_parser().parse_args(["probe"]).tasks is None
        assert "depth" in probe_task_names()
    finally:
        unload_depth()
    assert "depth" not in probe_task_names()


def test_a_probe_only_task_without_a_loss_refuses_a_trained_body():
    from benchmarks.cli.main import load_plugins
    from benchmarks.probe.tasks import build_task

    try:
        load_plugins(["--include", str(EXAMPLE)])
        linear = default_protocol()
        assert build_task("depth", linear).loss_spec is None
        with pytest.raises(ValueError, match="names no loss, so only a read-out that trains nothing"):
            build_task("depth", linear.replace(tasks={"depth": {"decoder": "pixelshuffle"}}))
    finally:
        unload_depth()


def test_entry_point_plugins_load_and_a_failing_one_is_named(tmp_path, monkeypatch):
    from importlib import metadata

    from sapiens2 import plugins

    (tmp_path / "ep_plugin_ok.py").write_text("LOADED = True\n")
    (tmp_path / "ep_plugin_bad.py").write_text("raise RuntimeError('broken on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    group = plugins.ENTRY_POINT_GROUP
    found = {"ok": [metadata.EntryPoint("ok", "ep_plugin_ok", group)],
             "bad": [metadata.EntryPoint("bad", "ep_plugin_bad", group)]}
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: found["ok"])
    assert plugins.load_entry_points() == ["ok"] and sys.modules["ep_plugin_ok"].LOADED
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: found["bad"])
    with pytest.raises(plugins.PluginError, match="entry point 'bad'.*RuntimeError: broken on import"):
        plugins.load_entry_points()
    for name in ("ep_plugin_ok", "ep_plugin_bad"):
        sys.modules.pop(name, None)


def test_a_record_of_an_unknown_task_needs_its_declarations_and_old_records_still_read():
    from sapiens2.records.integrity import record_hash
    from sapiens2.records.results import RecordError, make_record
    from sapiens2.records.schema import validate

    fields = dict(model="m", dataset={"name": "d", "split": "test", "content_hash": None},
                  protocol={"kind": "eval"}, metrics={"abs_rel": 0.1}, config={})
    decls = {"abs_rel": {"label": "AbsRel %", "higher_is_better": False, "scale": 100.0, "headline": True}}
    try:
        assert make_record(task="no_such_task", metric_decls=decls, **fields)["schema_minor"] == 1
        with pytest.raises(RecordError, match="does not declare its metrics"):
            make_record(task="no_such_task", **fields)
        bad = {"abs_rel": {**decls["abs_rel"]}, "other": {"label": "x", "higher_is_better": True}}
        with pytest.raises(RecordError, match=r"metric_decls: keys without a metric value: \['other'\]"):
            make_record(task="no_such_task", metric_decls=bad, **fields)
    finally:
        from sapiens2.records.declared import forget

        forget("no_such_task")
    old = make_record(task="seg", **fields)  # as a record of schema minor 0 was written
    del old["schema_minor"]
    old["record_hash"] = record_hash(old)
    assert validate(old) == []


def test_a_task_without_a_model_is_refused_by_predict_with_a_reason(tmp_path, capsys):
    from sapiens2.inference import resolve_config

    try:
        with pytest.raises(SystemExit):
            main(["--include", str(EXAMPLE), "predict", "--task", "depth", "--random-weights", "a.png"])
        assert "invalid choice: 'depth'" in capsys.readouterr().err
        with pytest.raises(ValueError, match="task 'depth' has no task model"):
            resolve_config("depth", arch="sapiens2_0.4b")
    finally:
        unload_depth()
