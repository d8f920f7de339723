"""The typed read side of result records (sapiens2.records.view): what it reads, and that nobody else
reads a record's keys.

Readers (leaderboard, compare, terminal tables, the mean over seeds) go through ``RecordView``; the
record format itself (``sapiens2/records/``: schema, integrity, writer, view) is the one place that
touches a record's keys. The scan below fails on any raw record-key access elsewhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sapiens2.records.integrity import record_hash
from sapiens2.records.results import load_records, make_record, read_record, write_record
from sapiens2.records.view import Intervals, RecordView, protocol_key

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("sapiens2", "evaluators", "leaderboard", "benchmarks")
RECORD_PACKAGE = "sapiens2/records/"

# Keys that only a result record (or its intervals) has: reading one of them off any object outside
# the record package is raw record access.
RECORD_KEYS = {"run_id", "created_utc", "metrics", "metrics_std", "intervals", "breakdowns", "provenance",
               "record_hash", "schema_version", "seeds", "timings", "_path", "protocol_id", "bounds",
               "content_hash", "side_file", "images_sha256", "bootstrap_sha256", "metric_decls",
               "schema_minor"}
# A record part, then one of its fields: ``rec["model"]["name"]``, ``rec["protocol"].get("kind")``.
PART_FIELDS = {"model": {"name", "weights", "checkpoint", "params"},
               "protocol": {"kind", "protocol_id", "description"},
               "dataset": {"name", "split", "content_hash", "num_samples", "root"}}
# Objects that are not records but have a column or key named like a record's (file, key): why.
NOT_RECORDS = {
    ("benchmarks/cli/eval.py", "metrics"): "evaluate_folders' output (an evaluator's metrics, no record)",
    ("leaderboard/report_view.py", "seeds"): "a row of the leaderboard's long frame",
    ("leaderboard/tables.py", "seeds"): "a group of the leaderboard's long frame",
    ("leaderboard/tables.py", "run_id"): "a group of the leaderboard's long frame",
    ("benchmarks/reproduce/tables.py", "content_hash"): "protocol_for's description of the measured data",
    ("benchmarks/analysis/noisy_oracle.py", "metrics"): "probe_stream's rows: evaluator metrics, no record",
    ("leaderboard/comparisons.py", "protocol_id"): "a paired comparison (compare's output), no record",
    ("leaderboard/standing.py", "protocol_id"): "a folded paired verdict, no record",
    ("leaderboard/summary_view.py", "protocol_id"): "a folded paired verdict or a long-frame row, no record",
    ("benchmarks/analysis/split_leaderboards.py", "protocol_id"): "a row of the measurement file, no record",
    ("benchmarks/docs_tables.py", "protocol_id"): "a row of the real-fixture measurement file, no record",
}


def _key(node: ast.AST) -> tuple[str, ast.AST] | None:
    """(string key, subscripted object) of ``x["key"]`` (read) or ``x.get("key", ...)``."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and \
            isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value, node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value, node.func.value
    return None


def raw_record_access(path: Path) -> list[tuple[int, str, str]]:
    """``(line, key, source)`` of every raw record-key read in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        hit = _key(node)
        if hit is None:
            continue
        key, inner = hit
        if isinstance(inner, ast.BoolOp) and inner.values:  # (rec.get("protocol") or {}).get("kind")
            inner = inner.values[0]
        part = _key(inner)
        if key in RECORD_KEYS or (part is not None and key in PART_FIELDS.get(part[0], ())):
            found.append((node.lineno, key, ast.unparse(node)[:80]))
    return found


def _scan() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(RECORD_PACKAGE):
                continue
            for line, key, src in raw_record_access(path):
                out.setdefault((rel, key), []).append(f"{rel}:{line}: {src}")
    return out


def test_no_raw_record_key_access_outside_the_record_package():
    found = _scan()
    bad = [loc for k, locs in sorted(found.items()) if k not in NOT_RECORDS for loc in locs]
    assert not bad, "read records through sapiens2.records.view.RecordView:\n" + "\n".join(bad)
    stale = sorted(set(NOT_RECORDS) - set(found))
    assert not stale, f"NOT_RECORDS entries that match nothing any more (remove them): {stale}"


def test_the_scan_sees_raw_access(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text('def f(rec, r):\n    a = rec["metrics"]["mIoU"]\n'
                   '    b = (r.get("protocol") or {}).get("kind")\n'
                   '    c = rec["model"]["name"]\n    d = r.get("intervals")\n'
                   '    cfg = rec["model"]["backbone"]\n'  # a config's model part: not a record field
                   '    out = {}\n    out["seeds"] = [0]\n')  # building a dict is not reading a record
    keys = sorted(key for _, key, _ in raw_record_access(mod))
    assert keys == ["intervals", "kind", "metrics", "name"]


def _record(**kw) -> dict:
    base = dict(model={"name": "sapiens2_0.1b", "weights": "random(seed=0)", "params": 5,
                       "checkpoint": {"path": "w.safetensors", "sha256": "ab" * 32}},
                task="seg",
                dataset={"name": "synth", "split": "test", "content_hash": "cd" * 32, "num_samples": 8},
                protocol={"kind": "probe", "protocol_id": "ext-probe-1", "description": "d"},
                metrics={"mIoU": 40.0, "mAcc": 50.0, "aAcc": None}, config={"lr": 0.1}, seeds=[0, 1],
                metrics_std={"mIoU": 1.5}, timings={"train_s": 2.0},
                intervals={"level": 0.95, "method": "bootstrap", "resamples": 10, "seed": 3, "n": 8,
                           "bounds": {"mIoU": [38.0, 42.0]}})
    base.update(kw)
    return make_record(**base)


def test_view_reads_every_part_of_a_record(tmp_path):
    path = write_record(tmp_path / "r.json", _record())
    [raw] = load_records([tmp_path])
    v = RecordView.of(raw)
    assert v.path == str(path) and v.where == str(path)
    assert v.task == "seg" and v.seeds == (0, 1) and v.schema_version == 2
    assert (v.model.name, v.model.params, v.model.random_init, v.model.checkpoint_sha256) == \
        ("sapiens2_0.1b", 5, True, "ab" * 32)
    assert v.dataset.key == "sha256:" + "cd" * 32 and v.dataset.label == "synth/test"
    assert v.dataset.num_samples == 8
    assert (v.protocol.kind, v.protocol.id, v.protocol.key) == ("probe", "ext-probe-1", "probe:ext-probe-1")
    assert dict(v.metrics) == {"mIoU": 40.0, "mAcc": 50.0, "aAcc": None}
    assert dict(v.metrics_std) == {"mIoU": 1.5}
    iv = v.interval("mIoU")
    assert (iv.value, iv.lo, iv.hi, iv.n, iv.level, iv.method, iv.resamples) == \
        (40.0, 38.0, 42.0, 8, 0.95, "bootstrap", 10)
    assert v.interval("mAcc") is None and list(v.metric_intervals()) == ["mIoU"]
    assert isinstance(v.intervals, Intervals) and v.intervals.seed == 3 and v.intervals.side_file is None
    assert v.provenance.package == "sapiens2-bench" and dict(v.config) == {"lr": 0.1}
    assert dict(v.timings) == {"train_s": 2.0} and v.device_type == "cpu"
    assert v.record_hash == raw["record_hash"] == v.content_hash()
    assert RecordView.of(v) is v


def test_view_changes_nothing_and_is_read_only(tmp_path):
    rec = _record()
    before = record_hash(rec)
    v = RecordView.of(rec)
    with pytest.raises(TypeError):
        v.metrics["mIoU"] = 0.0  # a read-only mapping
    copy = v.model.as_dict()
    copy["name"] = "other"
    assert v.model.name == "sapiens2_0.1b" and record_hash(rec) == before == rec["record_hash"]
    assert v.as_dict() == {k: val for k, val in rec.items()}
    # a record written from the view's parts has the same content as the original
    again = make_record(model=v.model.as_dict(), task=v.task, dataset=v.dataset.as_dict(),
                        protocol=v.protocol.as_dict(), metrics=dict(v.metrics), config=dict(v.config),
                        seeds=v.seeds, metrics_std=dict(v.metrics_std), intervals=v.intervals.as_dict(),
                        timings=dict(v.timings), run_id=v.run_id)
    for part in ("model", "dataset", "protocol", "metrics", "metrics_std", "intervals", "config", "seeds"):
        assert again[part] == rec[part], part
    path = write_record(tmp_path / "x.json", rec)
    assert read_record(path) == rec


def test_view_refuses_what_is_not_a_record():
    with pytest.raises(TypeError, match="expected a result record"):
        RecordView(["not", "a", "record"])


def test_protocol_key_is_one_function():
    from leaderboard import paper

    for kind, pid in (("eval", None), ("eval", "eval-custom-1"), ("probe", "probe-v4-0123456789ab")):
        assert paper.protocol_key(kind, pid) == protocol_key(kind, pid)
    assert protocol_key("eval", None) == "eval" and protocol_key("eval", "x") == "eval:x"


def test_leaderboard_build_dedupes_once(tmp_path, monkeypatch):
    """build_site runs the de-duplication once (it ran twice: in build_site and again in records_to_frame)."""
    import leaderboard.build as build
    import leaderboard.merge as merge
    import leaderboard.tables as tables

    for seed in (0, 1):
        write_record(tmp_path / "r" / f"s{seed}.json", _record(seeds=[seed], metrics_std=None))
    calls = []
    real = merge.dedupe_records

    def counting(records):
        calls.append(len(records))
        return real(records)

    monkeypatch.setattr(build, "dedupe_records", counting)
    monkeypatch.setattr(tables, "dedupe_records", counting)
    build.build_site([tmp_path / "r"], tmp_path / "site", with_figures=False)
    assert calls == [2]
