"""Reported numbers, leaderboard tables (protocols apart, seeds merged, deltas), reports, the CLI."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from benchmarks.cli.main import main
from leaderboard.build import build_site
from leaderboard.paper import PAPER_PROBE_PROTOCOL_ID, load_paper_results
from leaderboard.tables import group_tables, records_to_frame
from sapiens2.records.results import load_records, make_record, write_record
from sapiens2.reference import paper_results_path

EVIL = "<img src=x onerror=alert(1)>|\"'&"


def _rec(model, task, metrics, protocol, seed=0, params=None, dataset="synth"):
    return make_record(model={"name": model, "params": params}, task=task,
                       dataset={"name": dataset, "split": "test", "content_hash": None},
                       protocol=protocol, metrics=metrics, config={"p": str(protocol)}, seeds=[seed])


def test_paper_numbers_mapped_with_units():
    df = load_paper_results()
    assert (df["source"] == "reported").all()
    raw = pd.read_csv(paper_results_path())
    # every printed number of the mapped task tables is kept (Table 8 whole-body duplicates excepted)
    for table, n_metrics in [("Table 4", 2), ("Table 5", 5), ("Table 6", 5), ("Table 7", 5), ("Table 2", 8)]:
        printed = raw[(raw["table"] == table) & ~raw["task"].str.contains("secondary|28cls")]
        assert len(df[df["table"] == table]) == len(printed) == printed["model"].nunique() * n_metrics
    row = df[(df["model"] == "Sapiens2-5B") & (df["table"] == "Table 3") & (df["metric"] == "wholebody/AP")]
    assert row["value"].item() == pytest.approx(0.823) and row["protocol_key"].item() == "eval"
    t2 = df[df["table"] == "Table 2"]
    assert set(t2["protocol_key"]) == {f"probe:{PAPER_PROBE_PROTOCOL_ID}"}
    assert t2[(t2["model"] == "DINOv3-7B") & (t2["metric"] == "mae")]["value"].item() == pytest.approx(0.0348)
    # Table 5 factors give metres consistent with max|axis| <= L2 <= sum|axis| (pixel-pooled means of
    # the same errors) on the Sapiens2 and MoGe rows; DUSt3R, UniDepth and VGGT break it under any
    # power-of-ten reading (their Z error exceeds L2), see leaderboard/paper.py.
    t5 = df[df["table"] == "Table 5"].pivot(index="model", columns="metric", values="value")
    axes = t5[["x_mae", "y_mae", "z_mae"]]
    ok = (axes.max(axis=1) <= t5["l2_mean"]) & (t5["l2_mean"] <= axes.sum(axis=1))
    assert sorted(ok[~ok].index) == ["DUSt3R", "UniDepth", "VGGT"]
    assert df["params"].notna().sum() > 0 and df["value"].map(math.isfinite).all()


def test_protocols_never_mixed_and_seeds_merged():
    recs = [
        _rec("sapiens2_0.1b", "seg", {"mIoU": 40.0}, {"kind": "probe", "protocol_id": "pA"}, seed=0),
        _rec("sapiens2_0.1b", "seg", {"mIoU": 44.0}, {"kind": "probe", "protocol_id": "pA"}, seed=1),
        _rec("sapiens2_0.1b", "seg", {"mIoU": 90.0}, {"kind": "probe", "protocol_id": "pB"}, seed=0),
        _rec("sapiens2_0.1b", "seg", {"mIoU": 70.0}, {"kind": "eval"}, seed=0),
        # an aggregate over seeds 0,1 of pA: must not be counted on top of the per-seed records
        make_record(model="sapiens2_0.1b", task="seg", dataset={"name": "synth", "split": "test",
                    "content_hash": None}, protocol={"kind": "probe", "protocol_id": "pA"},
                    metrics={"mIoU": 1.0}, metrics_std={"mIoU": 0.0}, config={}, seeds=[0, 1]),
    ]
    tables = {t.protocol_key: t for t in group_tables(records_to_frame(recs))}
    assert set(tables) == {"eval", "probe:pA", "probe:pB"}
    a = tables["probe:pA"].rows
    assert len(a) == 1 and a["mIoU %"].item() == pytest.approx(42.0)
    assert tables["probe:pA"].std["mIoU %"].item() == pytest.approx(math.sqrt(8.0))
    assert tables["probe:pB"].rows["mIoU %"].item() == 90.0
    assert tables["eval"].rows["mIoU %"].item() == 70.0


def test_deltas_against_reported_same_protocol_only():
    from leaderboard.tables import combine

    recs = [_rec("sapiens2_0.4b", "seg", {"mIoU": 70.0, "mAcc": 80.0}, {"kind": "eval"}),
            _rec("sapiens2_0.4b", "seg", {"mIoU": 50.0}, {"kind": "probe", "protocol_id": "ours"}),
            make_record(model={"name": "sapiens2_0.8b", "params": 1, "weights": "random(seed=0)"}, task="seg",
                        dataset={"name": "synth", "split": "test", "content_hash": None},
                        protocol={"kind": "eval"}, metrics={"mIoU": 5.0}, config={}, seeds=[0])]
    paper = load_paper_results()
    tables = {t.protocol_key: t for t in group_tables(combine(records_to_frame(recs), paper))
              if t.task == "seg"}
    ev = tables["eval"].rows
    ours = ev[(ev["source"] == "reproduced") & (ev["model"] == "sapiens2_0.4b")]
    assert ours["Δ mIoU %"].item() == pytest.approx(70.0 - 79.5)
    assert ours["Δ mAcc %"].item() == pytest.approx(80.0 - 90.9)
    assert ev[ev["source"] == "reported"]["Δ mIoU %"].isna().all()
    # a randomly initialised model is not the published one: shown as such, never given a delta
    rand = ev[ev["model"] == "sapiens2_0.8b (random init)"]
    assert len(rand) == 1 and rand["Δ mIoU %"].isna().all()
    # our probe and the paper's Table 2 probe are different protocols: separate tables, no deltas
    assert "Δ mIoU %" not in tables["probe:ours"].rows
    assert set(tables[f"probe:{PAPER_PROBE_PROTOCOL_ID}"].rows["source"]) == {"reported"}


@pytest.fixture()
def results_dir(tmp_path):
    out = tmp_path / "results"
    probe = {"kind": "probe", "protocol_id": "p1"}
    for seed in (0, 1):
        for model, params, base in [("sapiens2_0.1b", 114_000_000, 0.4), (EVIL, 5_000_000, 0.1)]:
            write_record(out / f"pose-{params}-{seed}.json", _rec(
                model, "pose", {"wholebody": {"AP": base + 0.01 * seed, "AR": base + 0.1},
                                "body": {"AP": base + 0.2}, "face": {"AP": base - 0.05}},
                probe, seed, params, dataset=EVIL))
            write_record(out / f"seg-{params}-{seed}.json", _rec(
                model, "seg", {"summary": {"mIoU": 100 * base, "mAcc": 60.0},
                               "per_class": {"IoU": [base] * 29}}, probe, seed, params))
    return out


def test_build_site_escapes_and_is_self_contained(results_dir, tmp_path):
    paths = build_site([results_dir], tmp_path / "site", include_paper=True)
    page = paths["html"].read_text(encoding="utf-8")
    assert EVIL not in page and "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;|&#34;&#39;&amp;" in page  # markupsafe's escapes
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "page must not load anything remotely"
    assert "<link" not in page and "Content-Security-Policy" in page
    script = page[page.index("<script>"):]
    assert "alert" not in script and "sapiens2_0.1b" not in script  # no user data in JS
    assert page.count('<img alt="') >= 4 and "data:image/png;base64," in page
    # one table per (task, protocol); the paper's probing table stays apart from ours; every paper
    # table is shown whatever the records are (here probe records only), after ours
    ids = re.findall(r'<table class="lb" id="([^"]+)"', page)
    assert ids[0].startswith("summary-")
    assert ids.index("t-pose-probe-p1") < ids.index("t-pose-probe-paper-table2")  # ours first
    assert "t-seg-eval" not in ids  # no measured task-model table without task-model records
    for table in ("t-seg-paper-Table-4", "t-pointmap-paper-Table-5", "t-normal-paper-Table-6",
                  "t-albedo-paper-Table-7", "t-pose-paper-Table-3", "t-pose-paper-Table-8--appendix-"):
        assert table in ids, table
    md = paths["markdown"].read_text(encoding="utf-8")
    assert EVIL not in md and "onerror" in md
    blocks, block = [], []
    for ln in md.splitlines() + [""]:
        if ln.startswith("|"):
            block.append(len(re.findall(r"(?<!\\)\|", ln)))
        elif block:
            blocks.append(block)
            block = []
    assert len(blocks) >= 4 and all(len(set(b)) == 1 for b in blocks), "a user string broke a table"
    assert (tmp_path / "site" / "figures").is_dir() and paths["csv"].stat().st_size > 0


def test_cli_build_and_bad_input(results_dir, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["leaderboard", "build", str(results_dir), "--out", str(site), "--no-figures"]) == 0
    assert str(site / "index.html") in capsys.readouterr().out
    assert main(["leaderboard", "validate", str(results_dir)]) == 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": {}}')
    assert main(["leaderboard", "build", str(results_dir), str(bad), "--out", str(site)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "not a sapiens2-bench result" in err
    assert main(["leaderboard", "validate", str(bad)]) == 1
    assert main(["leaderboard", "build", str(tmp_path / "none"), "--out", str(site)]) == 1
    assert "no such results file" in capsys.readouterr().err
    assert len(load_records([results_dir])) == 8
