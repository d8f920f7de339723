"""benchmarks.analysis.split_leaderboards: two main-job folders -> a measurement file -> the docs' tables."""

from __future__ import annotations

import json

import pytest

from benchmarks.analysis import split_leaderboards as sl
from sapiens2.records.integrity import protocol_id
from sapiens2.records.results import make_record, write_record

PROTOCOL = {"version": 5, "input_size": [64, 48], "tasks": {"seg": {"loss": "ce"}}}
PID = protocol_id("probe", 5, PROTOCOL)


def _job(out, miou: dict[str, float], beyond_floor: set[str]):
    """A main-job folder: seg records of ``miou`` (name -> value, interval +-1) and its comparisons."""
    for name, value in miou.items():
        backbone = {"gt-oracle": "GroundTruthOracle", "floor": "FloorReference"}.get(name)
        rec = make_record(model={"name": name, "backbone": backbone}, task="seg",
                          dataset={"name": "synth", "split": "test", "content_hash": "ab" * 32},
                          protocol={"kind": "probe", "protocol_id": PID}, metrics={"mIoU": value},
                          config={"protocol": PROTOCOL}, seeds=[0],
                          intervals={"level": 0.95, "method": "bootstrap", "resamples": 100, "seed": 0,
                                     "n": 96, "bounds": {"mIoU": [value - 1, value + 1]}})
        write_record(out / "results" / name / PID / "seg" / "seed0.json", rec)
    comps = [{"a": a, "b": "floor", "task": "seg", "metric": "mIoU", "value_a": miou[a],
              "value_b": miou["floor"], "difference": miou[a] - miou["floor"],
              "low": miou[a] - miou["floor"] - 0.5,
              "high": miou[a] - miou["floor"] + 0.5, "n": 96,
              "verdict": f"{a} better beyond the 95% interval" if a in beyond_floor else "no difference"}
             for a in miou if a not in ("floor", "gt-oracle")]
    (out / "comparisons.json").write_text(json.dumps({"comparisons": comps}))
    return out


def test_two_jobs_give_one_measurement_and_the_docs_tables(tmp_path, capsys):
    real = _job(tmp_path / "real", {"gt-oracle": 100.0, "floor": 10.0, "pixels": 12.0, "sapiens": 40.0},
                beyond_floor={"sapiens"})
    proc = _job(tmp_path / "proc", {"floor": 5.0, "gt-oracle": 100.0, "pixels": 7.0, "sapiens": 6.0},
                beyond_floor={"pixels", "sapiens"})
    path = tmp_path / "m.json"
    assert sl.main([f"realistic={real}", f"procedural={proc}", "--json", str(path)]) == 0
    rec = json.loads(path.read_text())
    splits = rec["numbers"]["splits"]
    assert list(splits) == ["realistic", "procedural"] and rec["commit"]
    row = next(r for r in splits["realistic"]["rows"] if r["backbone"] == "sapiens")
    assert (row["value"], row["low"], row["high"], row["n"]) == (40.0, 39.0, 41.0, 96)
    assert row["gap_closed"] == pytest.approx(30 / 90) and row["protocol_id"] == PID
    md = sl.leaderboard_markdown(rec)
    assert md == capsys.readouterr().out.split(f"wrote {path}")[0].rstrip("\n")
    lines = md.splitlines()
    real_rows = [ln for ln in lines[:lines.index("#### procedural split")] if ln.startswith("| ")]
    # the oracle first, the floor second, the cells value [interval] n and the gap closed
    assert real_rows[1].startswith("| gt-oracle |") and real_rows[2].startswith("| floor |")
    assert "| sapiens | 40.0 [39.0, 41.0] n=96 (33.3%) |" in md
    ranking = next(ln for ln in lines if ln.startswith("| seg |"))
    assert ranking == "| seg | sapiens, pixels | pixels, sapiens | sapiens | pixels, sapiens |"


def test_a_folder_without_records_is_an_error_naming_it(tmp_path):
    (tmp_path / "results").mkdir()
    with pytest.raises(ValueError, match="no probe records"):
        sl.split_rows(tmp_path)
    with pytest.raises(SystemExit, match="LABEL=OUT"):
        sl.main([str(tmp_path), "--json", str(tmp_path / "m.json")])
