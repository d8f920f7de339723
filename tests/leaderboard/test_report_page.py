"""The published report: summary first, ceiling row, measured vs reported, paper tables, per-class tables,
protocol names and knobs, provenance, notes, intervals, figures that keep 0 and full names, templates."""

from __future__ import annotations

import fnmatch
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from leaderboard.build import build_site
from leaderboard.protocols import flatten
from sapiens2.records.results import RecordError, make_record, write_record

ROOT = Path(__file__).resolve().parents[2]
PID = "probe-v3-0123456789ab"
PROTOCOL = {"version": 3, "input_size": [64, 48], "iterations": 30, "tasks": {"seg": {"loss": "ce"}}}
IV = {"level": 0.95, "method": "bootstrap", "resamples": 1000, "seed": 0, "n": 12}


def _rec(model, task, metrics, weights="random(seed=0)", params=1_000_000, intervals=None, **model_extra):
    from sapiens2.records.integrity import protocol_id

    pid = protocol_id("probe", 3, PROTOCOL)
    return make_record(model={"name": model, "params": params, "weights": weights, **model_extra}, task=task,
                       dataset={"name": "synth", "split": "test", "content_hash": None, "num_samples": 12},
                       protocol={"kind": "probe", "protocol_id": pid}, metrics=metrics,
                       config={"protocol": PROTOCOL, "backbone": {"w": weights}}, seeds=[0],
                       intervals=intervals)


class _Tables(HTMLParser):
    """Every ``table.lb``: header labels and, per tbody class, rows as (tr attrs, [(td class, text)])."""

    def __init__(self):
        super().__init__()
        self.tables, self.cur, self.body, self.row, self.cell = {}, None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "lb" in (a.get("class") or ""):
            self.cur = self.tables.setdefault(a["id"], {"head": [], "bodies": {}})
        elif self.cur is not None and tag == "tbody":
            self.body = self.cur["bodies"].setdefault(a.get("class", ""), [])
        elif self.cur is not None and tag == "tr" and self.body is not None:
            self.row = (a, [])
            self.body.append(self.row)
        elif self.cur is not None and tag in ("td", "th"):
            self.cell = [a.get("class") or "", ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self.cur, self.body = None, None
        elif tag in ("td", "th") and self.cell is not None:
            if self.body is None:
                self.cur["head"].append(self.cell[1])
            else:
                self.row[1].append(tuple(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data


def _parse(page: str) -> dict:
    p = _Tables()
    p.feed(page)
    return p.tables


@pytest.fixture()
def site(tmp_path):
    seg_pc = {"IoU": [0.5, None] + [0.25] * 27}
    recs = [
        _rec("gt-oracle", "seg", {"summary": {"mIoU": 99.0, "mDice": 99.0, "mFscore": 99.0},
                                  "per_class": seg_pc}, weights="none", params=None,
             backbone="GroundTruthOracle"),
        _rec("sapiens2_0.4b", "seg", {"summary": {"mIoU": 40.0, "mDice": 30.0, "mFscore": 90.0},
                                      "per_class": seg_pc}, weights=None, params=398_000_000,
             checkpoint={"path": "ckpt.safetensors", "sha256": "ab" * 32},
             intervals={**IV, "bounds": {"mIoU": [38.5, 41.25]}}),
        _rec("pixels", "seg", {"mIoU": 4.0}, weights="none", params=None),
        _rec("pixels", "normal", {"normal_mae": 40.0, "normal_median_deg": 30.0}, weights="none",
             params=None),
    ]
    for i, r in enumerate(recs):
        write_record(tmp_path / "res" / f"{i}.json", r)
    paths = build_site([tmp_path / "res"], tmp_path / "site", include_paper=True,
                       protocol_names={recs[0]["protocol"]["protocol_id"]: "probe v3 quick"})
    return paths, recs


def test_intervals_schema_is_optional_and_checked():
    ok = _rec("m", "seg", {"mIoU": 40.0}, intervals={**IV, "bounds": {"mIoU": [38.0, 42.0]}})
    assert ok["intervals"]["bounds"] == {"mIoU": [38.0, 42.0]}
    assert "intervals" not in _rec("m", "seg", {"mIoU": 40.0})  # records without it stay valid
    cases = [({**IV, "bounds": {"mIoU": [42.0, 38.0]}}, "low 42.0 > high 38.0"),
             ({**IV, "bounds": {"mAcc": [1.0, 2.0]}}, "keys without a metric value: ['mAcc']"),
             ({**IV, "bounds": {"mIoU": [1.0]}}, "expected [low, high]"),
             ({**IV, "method": "jackknife", "bounds": {}}, "is not one of"),
             ({k: v for k, v in IV.items() if k != "n"} | {"bounds": {}}, "missing required field 'n'"),
             ({**IV, "level": 95, "bounds": {}}, "intervals.level")]
    for intervals, message in cases:
        with pytest.raises(RecordError, match=re.escape(message)):
            _rec("m", "seg", {"mIoU": 40.0}, intervals=intervals)


def test_summary_first_with_intervals_n_and_kinds(site):
    paths, _ = site
    page = paths["html"].read_text(encoding="utf-8")
    tables = _parse(page)
    first = next(iter(tables))
    assert first.startswith("summary-") and page.index('id="summary"') < page.index('id="protocols"')
    assert [t for t in tables if t.startswith("summary-")] == [first]  # one protocol: one summary table
    head = tables[first]["head"]
    # the columns of the tasks measured under this protocol only (no pose, albedo... records here)
    assert head == ["model", "kind", "seg: mIoU % ↑", "normal: mean deg ↓"]
    assert "<h3>Summary — probe v3 quick</h3>" in page
    body = tables[first]["bodies"]
    (ceiling,) = body["ceiling"]  # the oracle is a reference row: apart, never bolded
    assert ceiling[0]["data-model"] == "gt-oracle" and ceiling[1][1][1] == "ceiling (GT oracle)"
    assert not any("best" in cls for cls, _ in ceiling[1])
    rows = {r[0]["data-model"]: r[1] for r in body["ranked"]}
    assert set(rows) == {"sapiens2_0.4b", "pixels"}
    seg = head.index("seg: mIoU % ↑")
    # value, interval, rank and n (12 < 30 test samples: flagged small)
    assert rows["sapiens2_0.4b"][seg][1] == "40.00[38.50, 41.25]rank 1 · n=12 small"
    assert {"best", "small"} <= set(rows["sapiens2_0.4b"][seg][0].split())  # the best measured row is bolded
    assert rows["pixels"][seg][1] == "4.00rank 2 · n=12 small"  # no interval: its value alone ranks it
    assert "best" not in rows["pixels"][head.index("normal: mean deg ↓")][0]  # a lone value is no "best"
    assert rows["sapiens2_0.4b"][1][1] == "pretrained" and rows["pixels"][1][1] == "weight-free"
    assert "random-init row ranks first" not in page  # a pretrained row ranks first: no note
    assert "no-pretrained" not in page  # a pretrained row exists: no banner


def test_task_table_ceiling_sources_provenance_notes(site):
    paths, recs = site
    page = paths["html"].read_text(encoding="utf-8")
    pid = recs[0]["protocol"]["protocol_id"]
    t = _parse(page)["t-seg-probe-" + pid]
    assert t["head"][0] == "model"
    for col in ("source", "kind", "rank", "n", "commit", "weights sha256", "date"):
        assert col in t["head"], col
    (ceiling,) = t["bodies"]["ceiling"]
    assert ceiling[0]["data-model"] == "gt-oracle"
    assert not any("best" in cls for cls, _ in ceiling[1]), "the oracle is never bolded"
    assert ceiling[1][t["head"].index("rank")][1] == "-", "the oracle is never ranked"
    ranked = {r[0]["data-model"]: [c[1] for c in r[1]] for r in t["bodies"]["ranked"]}
    best = [cls for cls, _ in t["bodies"]["ranked"][0][1]]
    assert "best" in best[t["head"].index("mIoU %")]
    ours = ranked["sapiens2_0.4b"]
    col = t["head"].index
    assert ours[col("source")] == "measured" and ours[col("rank")] == "1"
    assert ours[col("weights sha256")] == "ab" * 6 and ours[col("n")] == "12 (small n)"
    assert ours[col("date")] == recs[1]["created_utc"][:10]
    prov = recs[1]["provenance"]
    commit = (prov["git_commit"] or "")[:10] + ("+dirty" if prov["git_commit"] and prov["git_dirty"] else "")
    assert ours[col("commit")] == (commit or "-")
    assert all(">reproduced<" not in cell for cell in re.findall(r"<td[^>]*>[^<]*</td>", page))
    # the misleading columns carry their note (a marker in the header and the text below the table)
    for label in ("mFscore %", "mDice %"):
        assert f"{label}†" in t["head"]
    notes = page[page.index(f'id="t-seg-probe-{pid}-notes"'):][:3000]
    assert "never predicted" in notes and "NaN" in notes
    assert "0.5-degree" in page and "median deg†" in _parse(page)["t-normal-probe-" + pid]["head"]


def test_per_class_table_in_percent_with_na(site):
    paths, recs = site
    page = paths["html"].read_text(encoding="utf-8")
    pid = recs[0]["protocol"]["protocol_id"]
    (key,) = [k for k in _parse(page) if k.startswith(f"t-seg-probe-{pid}-b-IoU")]
    t = _parse(page)[key]
    assert t["head"][:3] == ["model", "Background", "Apparel"]
    rows = {r[0]["data-model"]: [c[1] for c in r[1]] for r in t["bodies"]["ranked"]}
    assert rows["sapiens2_0.4b"][1:4] == ["50.00", "n/a", "25.00"]
    assert page.count('<img alt="IoU per class (%)"') == 1  # its figure beside it


def test_paper_tables_protocol_panel_and_markdown(site):
    paths, recs = site
    page = paths["html"].read_text(encoding="utf-8")
    tables = _parse(page)
    for t in ("t-pose-probe-paper-table2", "t-pose-paper-Table-3", "t-seg-paper-Table-4",
              "t-pointmap-paper-Table-5", "t-normal-paper-Table-6", "t-albedo-paper-Table-7",
              "t-pose-paper-Table-8--appendix-"):
        assert tables[t]["bodies"]["ranked"], t
        assert all("reported" in r[0]["class"] for r in tables[t]["bodies"]["ranked"])
    pid = recs[0]["protocol"]["protocol_id"]
    panel = page[page.index(f'id="p-probe-{pid}"'):]
    panel = panel[:panel.index("</details>")]
    assert "probe v3 quick" in panel and pid.rsplit("-", 1)[1] in panel
    for knob, value in flatten(PROTOCOL).items():
        assert f">{knob}</td>" in panel and f">{value}</td>" in panel, knob
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.index("## Summary") < md.index("## Protocols") < md.index("## seg") < md.index("## The paper")
    assert "| model | kind | seg: mIoU % ↑ | normal: mean deg ↓ |" in md
    assert r"\[38.50, 41.25\] (rank 1 · n=12 small)" in md
    assert "### Summary — probe v3 quick" in md
    assert "*gt-oracle (ceiling)*" in md and "n/a" in md and "`tasks.seg.loss` = ce" in md


def test_banner_when_no_row_is_pretrained(tmp_path):
    for i, (name, weights) in enumerate([("sapiens2_0.1b", "random(seed=0)"), ("pixels", "none")]):
        write_record(tmp_path / "r" / f"{i}.json", _rec(name, "seg", {"mIoU": 4.0}, weights=weights))
    paths = build_site([tmp_path / "r"], tmp_path / "site", with_figures=False)
    assert 'id="no-pretrained"' in paths["html"].read_text(encoding="utf-8")
    assert "No pretrained weights" in paths["markdown"].read_text(encoding="utf-8")


def test_figures_start_at_zero_name_every_kind_and_keep_full_names(monkeypatch):
    import leaderboard.plots as plots
    from leaderboard.tables import group_tables, records_to_frame

    long_name = "a-backbone-with-a-really-long-descriptive-name-v2"
    recs = [_rec(long_name, "seg", {"mIoU": 4.651}, params=5_000_000),
            _rec("other", "seg", {"mIoU": 4.658}, weights="pretrained", params=9_000_000,
                 intervals={**IV, "bounds": {"mIoU": [4.60, 4.70]}}),
            _rec("gt-oracle", "seg", {"mIoU": 4.7}, weights="none", params=None,
                 backbone="GroundTruthOracle")]
    (t,) = group_tables(records_to_frame(recs))
    figs = []
    monkeypatch.setattr(plots, "_png", lambda fig: figs.append(fig) or b"")
    plots.metric_vs_params(t)
    plots.comparison_bars(t)
    scatter, bars = figs
    ax = scatter.axes[0]
    assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] > 4.7, "the value axis must not zoom into noise"
    legend = [x.get_text() for x in ax.get_legend().get_texts()]
    assert "measured: random init" in legend and "measured: pretrained" in legend
    assert any(x.startswith("ceiling: GT oracle") for x in legend)
    annotations = [c.get_text().replace("\n", "") for c in ax.texts]
    assert long_name + " (random init)" in annotations
    labels = [x.get_text().replace("\n", "") for x in bars.axes[0].get_yticklabels()]
    assert long_name + " (random init)" in labels and bars.axes[0].get_xlim()[0] == 0.0
    bar_legend = [x.get_text() for x in bars.legends[0].get_texts()]
    assert "measured: random init" in bar_legend and "ceiling: GT oracle" in bar_legend
    # the interval is drawn as an error bar: [4.60, 4.70] around 4.658
    lines = [c for c in bars.axes[0].collections if len(c.get_segments())]
    spans = {round(s[0][0], 3): round(s[1][0], 3) for c in lines for s in c.get_segments()}
    assert spans.get(4.6) == 4.7


def test_templates_are_autoescaped_package_data():
    import tomllib

    from leaderboard.report_html import environment

    assert environment().autoescape is True
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = data.get("leaderboard", []) + data.get("*", [])
    files = sorted((ROOT / "leaderboard" / "templates").iterdir())
    assert {f.name for f in files} >= {"page.html", "macros.html", "report.css", "report.js"}
    for f in files:
        rel = f.relative_to(ROOT / "leaderboard").as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{rel} would not ship in a wheel"
    schema = ROOT / "sapiens2" / "records" / "result.schema.json"
    assert json.loads(schema.read_text())["properties"]["intervals"]
