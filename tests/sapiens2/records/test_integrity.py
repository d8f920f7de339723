"""Records that cannot be quietly altered or mixed up (issue 13 items 4, 10-13).

Edited ids, kinds, metrics and provenance are detected; the schema is a JSON Schema file that any
validator can use; runs, seeds and datasets are merged by identity, not by name; unreadable files
are named; user strings cannot break figures or run as spreadsheet formulas; counts of
non-finite predictions are shown.
"""

from __future__ import annotations

import copy
import json
import math
import shutil

import pandas as pd
import pytest

from benchmarks.cli.main import main
from benchmarks.probe.protocol import ProbeProtocol, quick_protocol
from leaderboard.build import build_site
from leaderboard.tables import group_tables, records_to_frame
from sapiens2.records.integrity import RECORD_HASH_FIELD, protocol_id, record_hash
from sapiens2.records.results import RecordError, load_records, make_record, read_record, write_record
from sapiens2.records.schema import SCHEMA_FILE, validate

DATA = {"name": "synth", "split": "test", "content_hash": "a" * 64}


def _probe_record(probe: ProbeProtocol | None = None, **kw):
    p = probe or quick_protocol()
    args = dict(model={"name": "sapiens2_0.1b", "params": 114_000_000}, task="seg", dataset=DATA,
                protocol={"kind": "probe", "protocol_id": p.protocol_id("seg")}, metrics={"mIoU": 40.0},
                config={"protocol": p.task_protocol("seg"), "task": "seg", "seed": 0}, seeds=[0])
    args.update(kw)
    return make_record(**args)


def _rec(model="m", metrics=None, seed=0, dataset=None, **kw):
    return make_record(model={"name": model, "params": 1_000_000}, task="seg", dataset=dataset or DATA,
                       protocol={"kind": "eval"}, metrics=metrics or {"mIoU": 50.0}, config={}, seeds=[seed],
                       **kw)


def _reseal(rec):
    """What a careless tool would do: edit, then recompute the record hash."""
    rec[RECORD_HASH_FIELD] = record_hash(rec)
    return rec


# ---- item 10: edits are detected ---------------------------------------------------------------


def test_protocol_id_formula_is_shared():
    p = ProbeProtocol()
    for task in p.tasks:
        assert p.protocol_id(task) == protocol_id("probe", p.version, p.task_protocol(task))
        assert quick_protocol().protocol_id(task) != p.protocol_id(task)


def test_a_v4_record_of_the_whole_protocol_still_validates():
    """Records made before the ids were per task hash the protocol of every task as one."""
    p = quick_protocol()
    v4 = {**p.to_dict(), "version": 4}
    for task, field in (("pose", "keypoint_set"), ("seg", "label_set")):  # fields added after v4
        assert v4["tasks"][task].pop(field) == ""
    for settings in v4["tasks"].values():  # the masked read-out's form, a field added after v4
        settings.pop("masked_readout", None)
    assert v4["tasks"]["pose"].pop("refine") == "bounded"  # the pose decode's rule, added after v4
    assert v4["feature_dtype"] == "float32"
    v4["feature_dtype"] = "float16"  # v4's default (float32 since the streamed probe)
    whole = protocol_id("probe", 4, v4)
    assert whole == "probe-v4-ec9031eee36e"  # quick_protocol()'s id before the ids were per task
    rec = _probe_record(protocol={"kind": "probe", "protocol_id": whole},
                        config={"protocol": v4, "task": "seg", "seed": 0})
    assert validate(rec) == []
    # a later version stores its own task's protocol alone, and so does any record of another task
    later = {**p.to_dict(), "version": 5}
    with pytest.raises(RecordError, match=r"tasks: \['albedo', .*\], but a seg record of protocol v5 stores"):
        _probe_record(protocol={"kind": "probe", "protocol_id": protocol_id("probe", 5, later)},
                      config={"protocol": later, "task": "seg", "seed": 0})
    pose = {**p.task_protocol("pose"), "version": 5}
    with pytest.raises(RecordError, match=r"config.protocol.tasks: \['pose'\], but a seg record"):
        _probe_record(protocol={"kind": "probe", "protocol_id": protocol_id("probe", 5, pose)},
                      config={"protocol": pose, "task": "seg", "seed": 0})
    seg = {**p.task_protocol("seg"), "version": 5}
    assert validate(_probe_record(protocol={"kind": "probe", "protocol_id": protocol_id("probe", 5, seg)},
                                  config={"protocol": seg, "task": "seg", "seed": 0})) == []


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda r: r["protocol"].__setitem__("protocol_id", ProbeProtocol().protocol_id("seg")),
         "does not match config.protocol"),
        (lambda r: r["protocol"].__setitem__("kind", "eval"), "is a probe protocol id"),
        (lambda r: r["config"]["protocol"].__setitem__("lr", 0.5), "does not match config.protocol"),
    ],
)
def test_protocol_id_is_checked_against_the_config(tmp_path, edit, reason):
    rec = _probe_record()
    path = write_record(tmp_path / "r.json", rec)
    assert read_record(path)["protocol"]["protocol_id"] == quick_protocol().protocol_id("seg")
    edited = copy.deepcopy(rec)
    edit(edited)
    path.write_text(json.dumps(edited))
    with pytest.raises(RecordError, match="record_hash: does not match"):
        read_record(path)
    # even with the record hash recomputed, the id no longer matches the protocol it was made with
    from sapiens2.records.schema import config_hash

    edited["config_hash"] = config_hash(edited["config"])
    path.write_text(json.dumps(_reseal(edited)))
    with pytest.raises(RecordError, match=reason) as e:
        read_record(path)
    assert str(path) in str(e.value)
    assert main(["leaderboard", "validate", str(path)]) == 1


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r["metrics"].__setitem__("mIoU", 99.0),
        lambda r: r["provenance"].__setitem__("git_commit", "0" * 40),
        lambda r: r["model"].__setitem__("name", "sapiens2_5b"),
        lambda r: r["dataset"].__setitem__("content_hash", "b" * 64),
        lambda r: r.__setitem__("seeds", [1]),
    ],
)
def test_edited_records_are_detected(tmp_path, edit, capsys):
    path = write_record(tmp_path / "r.json", _probe_record())
    assert main(["leaderboard", "validate", str(path)]) == 0
    rec = json.loads(path.read_text())
    edit(rec)
    path.write_text(json.dumps(rec, indent=1))
    with pytest.raises(RecordError, match="record_hash: does not match the record's content"):
        read_record(path)
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(path)]) == 1
    assert "INVALID" in capsys.readouterr().out


def test_version1_records_still_read_but_flagged(tmp_path, capsys):
    rec = _probe_record()
    assert rec["schema_version"] == 2 and len(rec[RECORD_HASH_FIELD]) == 64
    old = {k: v for k, v in rec.items() if k != RECORD_HASH_FIELD}
    old["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert read_record(path)["schema_version"] == 1
    assert main(["leaderboard", "validate", str(path)]) == 0
    assert "no record hash" in capsys.readouterr().out
    unsealed = {k: v for k, v in rec.items() if k != RECORD_HASH_FIELD}
    assert "record: missing required field 'record_hash'" in validate(unsealed)


# ---- item 11: the schema is a JSON Schema file ---------------------------------------------------


def test_schema_file_works_with_any_json_schema_validator(capsys):
    import jsonschema

    from sapiens2.tasks import task_names

    # the published schema is the file with the task table's tasks as the task enum
    assert main(["leaderboard", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["properties"]["task"]["enum"] == list(task_names())
    on_file = json.loads(SCHEMA_FILE.read_text())
    assert "enum" not in on_file["properties"]["task"]
    assert {**on_file["properties"]["task"], "enum": list(task_names())} == schema["properties"]["task"]
    jsonschema.Draft202012Validator.check_schema(schema)
    rec = _probe_record()
    jsonschema.validate(rec, schema)
    for mutate in (lambda r: r.__setitem__("task", "depth"), lambda r: r["protocol"].pop("protocol_id"),
                   lambda r: r.pop(RECORD_HASH_FIELD), lambda r: r.__setitem__("seeds", [0, 0])):
        bad = copy.deepcopy(rec)
        mutate(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


# ---- item 12: runs, seeds and datasets merged by identity ---------------------------------------


def _older(rec):
    rec["created_utc"] = "2020-01-01T00:00:00.000000Z"
    return _reseal(rec)


def test_two_runs_of_one_seed_are_one_seed():
    recs = [_older(_rec(metrics={"mIoU": 10.0}, seed=0)), _rec(metrics={"mIoU": 30.0}, seed=0),
            _rec(metrics={"mIoU": 20.0}, seed=1)]
    notes = []
    t = group_tables(records_to_frame(recs, notes), notes)[0]
    assert t.rows["mIoU %"].item() == pytest.approx(25.0), "the newest seed-0 run and seed 1"
    assert t.std["mIoU %"].item() == pytest.approx(math.sqrt(50.0))
    assert t.rows["seeds"].item() == "0,1"
    assert any("2 runs with seed(s) 0 are one seed" in n for n in t.notes)


def test_a_file_reached_twice_counts_once(tmp_path):
    d1, d2 = tmp_path / "a", tmp_path / "b"
    write_record(d1 / "r0.json", _rec(metrics={"mIoU": 10.0}, seed=0))
    write_record(d1 / "r1.json", _rec(metrics={"mIoU": 30.0}, seed=1))
    assert len(load_records([d1, d1, d1 / "r0.json"])) == 2
    d2.mkdir()
    shutil.copy(d1 / "r0.json", d2 / "copy.json")
    recs = load_records([d1, d2])
    assert len(recs) == 3
    notes = []
    t = group_tables(records_to_frame(recs, notes), notes)[0]
    assert t.rows["mIoU %"].item() == pytest.approx(20.0) and t.rows["seeds"].item() == "0,1"
    assert any("read 2 times" in n and "copy.json" in n for n in t.notes)
    # the same run id with other content is an accident that must not be averaged away
    edited = json.loads((d2 / "copy.json").read_text())
    edited["metrics"]["mIoU"] = 99.0
    (d2 / "copy.json").write_text(json.dumps(_reseal(edited)))
    with pytest.raises(ValueError, match="copy.json.*r0.json|r0.json.*copy.json"):
        build_site([d1, d2], tmp_path / "site", with_figures=False)


def test_datasets_are_merged_by_content_hash_only():
    other = {**DATA, "content_hash": "b" * 64}
    t = group_tables(records_to_frame([_rec("m1", {"mIoU": 10.0}, dataset=DATA),
                                       _rec("m1", {"mIoU": 90.0}, dataset=other)]))[0]
    assert len(t.rows) == 2, "same folder name, different content: two datasets, never averaged"
    assert dict(zip(t.rows["dataset"], t.rows["mIoU %"])) == {"synth/test [aaaaaaaa]": 10.0,
                                                              "synth/test [bbbbbbbb]": 90.0}
    assert any("different test sets" in n for n in t.notes)
    # another name for the same content is the same dataset
    renamed = {**DATA, "name": "people"}
    t = group_tables(records_to_frame([_rec("m1", {"mIoU": 10.0}, seed=0, dataset=DATA),
                                       _rec("m1", {"mIoU": 30.0}, seed=1, dataset=renamed)]))[0]
    assert len(t.rows) == 1 and t.rows["dataset"].item() == "people/test = synth/test"
    assert t.rows["mIoU %"].item() == pytest.approx(20.0)


def test_unreadable_result_files_are_named(tmp_path, capsys):
    write_record(tmp_path / "res" / "good.json", _rec())
    truncated = tmp_path / "res" / "seg-seed1.json"
    truncated.write_text(json.dumps(_rec(seed=1))[:120])
    binary = tmp_path / "res" / "garbage.json"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(RecordError) as e:
        load_records([tmp_path / "res"], skip_foreign=True)
    assert str(truncated) in str(e.value) and str(binary) in str(e.value)
    skipped = []
    assert len(load_records([tmp_path / "res"], skip_foreign=True, skipped=skipped)) == 1
    assert sorted(s.split(":")[0] for s in skipped) == sorted([str(binary), str(truncated)])
    site = tmp_path / "site"
    assert main(["leaderboard", "build", str(tmp_path / "res"), "--out", str(site), "--no-figures"]) == 1
    assert str(truncated) in capsys.readouterr().err
    assert main(["leaderboard", "build", str(tmp_path / "res"), "--out", str(site), "--no-figures",
                 "--skip-unreadable"]) == 0
    assert f"skipped  {truncated}" in capsys.readouterr().err


# ---- item 13: user strings in figures and spreadsheets -------------------------------------------


MATH = r"$\frac{1$"


def test_mathtext_in_names_does_not_break_figures(tmp_path):
    recs = [_rec(MATH, {"mIoU": 10.0}), _rec("$x$ and $y", {"mIoU": 20.0}),
            _rec("plain", {"summary": {"mIoU": 30.0}, "per_class": {"IoU": {"$\\sqrt{": 0.5, "ok": 0.4}}})]
    for i, r in enumerate(recs):
        write_record(tmp_path / "res" / f"{i}.json", r)
    paths = build_site([tmp_path / "res"], tmp_path / "site")
    assert len(list((tmp_path / "site" / "figures").glob("*.png"))) >= 2
    assert "\\frac{1" in paths["markdown"].read_text(encoding="utf-8")


def test_figure_errors_name_the_records(tmp_path, monkeypatch):
    import leaderboard.build as build

    path = write_record(tmp_path / "res" / "r.json", _rec("boom-model"))

    def broken(*args, **kw):
        raise ValueError("drawing failed")

    monkeypatch.setattr(build, "figures_for", broken)
    with pytest.raises(build.FigureError, match="boom-model") as e:
        build.build_site([tmp_path / "res"], tmp_path / "site")
    assert str(path) in str(e.value) and "drawing failed" in str(e.value)


def test_csv_cells_cannot_run_as_formulas(tmp_path):
    names = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "fine"]
    for i, name in enumerate(names):
        write_record(tmp_path / "res" / f"{i}.json", _rec(name, {"mIoU": -0.5 if i == 0 else 1.0}))
    paths = build_site([tmp_path / "res"], tmp_path / "site", with_figures=False)
    df = pd.read_csv(paths["csv"], keep_default_na=False)
    models = set(df["model"])
    assert "fine" in models
    for cell in models - {"fine"}:
        assert cell.startswith("'"), cell
    assert {cell[1:] for cell in models - {"fine"}} == set(names) - {"fine"}
    assert -0.5 in set(df["value"]), "numbers stay numbers"


@pytest.mark.parametrize("dtype", [object, "string", "str", "category"])
def test_csv_safe_neutralises_every_text_dtype(dtype):
    """Text columns of any dtype get the guard (pandas 3's default text dtype is ``str``, not object)."""
    from leaderboard.build import csv_safe

    df = pd.DataFrame({"model": pd.Series(["=1+1", "ok", "-x"], dtype=dtype), "value": [-1.0, 2.0, 3.0]})
    out = csv_safe(df)
    assert list(out["model"].astype(object)) == ["'=1+1", "ok", "'-x"], pd.__version__
    assert list(out["value"]) == [-1.0, 2.0, 3.0]


# ---- item 4 (display): counts of non-finite predictions ---------------------------------------------


def test_nonfinite_prediction_counts_are_shown(tmp_path):
    recs = [
        _rec("holey", {"mIoU": 90.0, "num_nonfinite_pred": 1234}),
        _rec("whole", {"mIoU": 80.0, "num_nonfinite_pred": 0}),
        make_record(model={"name": "pm", "params": 1}, task="pointmap", dataset=DATA,
                    protocol={"kind": "eval"}, metrics={"l2_mean": 0.0, "scale_aligned.nonfinite_pred": 5.0},
                    config={}, seeds=[0]),
    ]
    tables = {t.task: t for t in group_tables(records_to_frame(recs))}
    seg = tables["seg"]
    assert "num_nonfinite_pred" in [label for _, label, _ in seg.metric_columns]
    assert dict(zip(seg.rows["model"], seg.rows["num_nonfinite_pred"])) == {"holey": 1234.0, "whole": 0.0}
    assert any("holey (1234)" in n for n in seg.notes) and not any("whole (" in n for n in seg.notes)
    assert "scale_aligned.nonfinite_pred" in tables["pointmap"].rows
    for i, r in enumerate(recs):
        write_record(tmp_path / "res" / f"{i}.json", r)
    paths = build_site([tmp_path / "res"], tmp_path / "site", with_figures=False)
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "num\\_nonfinite\\_pred" in md and "1234" in md
    assert "scale\\_aligned.nonfinite\\_pred" in md
    assert "num_nonfinite_pred" in paths["html"].read_text(encoding="utf-8")
