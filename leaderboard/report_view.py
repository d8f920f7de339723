"""The report as plain data (what each table shows, cell by cell), shared by the HTML and Markdown writers.

Nothing here formats markup: values are formatted as text, and the writers escape every string
(the HTML templates by Jinja2's autoescape, Markdown by ``md_escape``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from leaderboard.catalog import metric_note, summary_metrics
from leaderboard.protocols import ProtocolInfo, paper_protocol_info
from leaderboard.rowinfo import KIND_LABELS, REFERENCE_KINDS, SOURCE_LABELS, has_pretrained_row
from leaderboard.tables import GroupTable
from sapiens2.tasks import task_names

NO_PRETRAINED = (
    "No measured backbone row in this report records pretrained weights (model.weights or "
    "model.checkpoint): each is a seeded random initialisation, weight-free, or does not say (see the "
    "kind column), so its numbers measure the protocol and the decoder, not a pretrained model. Probe "
    "real weights with --weights NAME=PATH."
)


def fmt(value, signed: bool = False) -> str:
    """Format a display value compactly (``-`` for missing).

    Example:
        >>> fmt(41.234), fmt(0.0123), fmt(float("nan")), fmt(2.5, signed=True)
        ('41.23', '0.012', '-', '+2.50')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    v = float(value)
    a = abs(v)
    digits = 1 if a >= 100 else 2 if a >= 1 or a == 0 else 3 if a >= 0.01 else 4
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def fmt_params(p) -> str:
    """Parameter count as ``0.398B`` / ``21.5M`` (``-`` when unknown)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    p = float(p)
    return f"{p / 1e9:.3f}B" if p >= 1e8 else f"{p / 1e6:.1f}M"


def _num(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(float(v))


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


@dataclass
class Cell:
    """One table cell: shown text, sort key, CSS classes, interval text and a tooltip."""

    text: str
    v: str = ""
    cls: str = ""
    ci: str = ""
    title: str = ""


@dataclass
class Column:
    label: str
    cls: str = ""
    hib: bool | None = None
    note: str = ""


@dataclass
class Row:
    model: str
    kind: str
    cells: list[Cell]
    cls: str = ""


@dataclass
class TableView:
    """One rendered table (a leaderboard table, a paper table, a breakdown or the summary)."""

    id: str
    title: str
    columns: list[Column]
    rows: list[Row]
    ceiling: list[Row] = field(default_factory=list)
    protocol: ProtocolInfo | None = None
    datasets: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metric_notes: list[tuple[str, str]] = field(default_factory=list)
    figures: list = field(default_factory=list)
    breakdowns: list[TableView] = field(default_factory=list)


def _value_cell(v, sd, lo, hi, desc, best: bool) -> Cell:
    text = fmt(v) + ("" if _missing(sd) else f" ± {fmt(sd)}")
    ci = "" if _missing(lo) or _missing(hi) else f"[{fmt(lo)}, {fmt(hi)}]"
    return Cell(text, _num(v), "best" if best else "", ci, desc if ci else "")


def table_view(t: GroupTable, info: ProtocolInfo, figures=(), breakdowns=()) -> TableView:
    """A leaderboard (or paper) table as cells: oracle rows apart (ceiling), best marks on ranked rows."""
    paper = bool(t.paper_table)
    metrics = [(label, hib, metric_note(t.task, key)) for key, label, hib in t.metric_columns]
    cols = [Column("model", "t")] + ([] if paper else [Column("source", "t"), Column("kind", "t"),
                                                       Column("rank", "", False)])
    cols += [Column("params"), Column("dataset", "t")] + ([] if paper else [Column("seeds", "t")])
    cols += [Column(label, "", hib, note) for label, hib, note in metrics]
    cols += [Column(d) for d, _ in t.delta_columns]
    if not paper:
        cols += [Column("n", "", None), Column("commit", "t"), Column("weights sha256", "t"),
                 Column("date", "t")]
    ranked = t.ranked()
    best = {}
    for label, hib, _ in metrics:
        col = t.rows.loc[ranked, label].dropna()
        if col.nunique() > 1:  # a tie of every row marks nothing
            best[label] = col.max() if hib else col.min()
    rows, ceiling = [], []
    for i, r in t.rows.iterrows():
        source = SOURCE_LABELS.get(r["source"], r["source"]) + (f" ({r['table']})" if r["table"] else "")
        cells = [Cell(r["model"], r["model"], "t", title=str(r["run_ids"] or ""))]
        if not paper:
            rank = "" if _missing(r["rank"]) else str(int(r["rank"]))
            kind = KIND_LABELS.get(r["kind"], r["kind"])
            cells += [Cell(source, source, "t"), Cell(kind, r["kind"], "t kind"), Cell(rank or "-", rank)]
        cells += [Cell(fmt_params(r["params"]), _num(r["params"])), Cell(r["dataset"], r["dataset"], "t")]
        if not paper:
            cells.append(Cell(r["seeds"] or "-", r["seeds"], "t"))
        for label, _, _ in metrics:
            v = r[label]
            is_best = bool(ranked[i]) and label in best and not _missing(v) and v == best[label]
            lo = t.ci_low.at[i, label] if label in t.ci_low else None
            hi = t.ci_high.at[i, label] if label in t.ci_high else None
            cells.append(_value_cell(v, t.std.at[i, label], lo, hi, r["ci_desc"], is_best))
        for d, _ in t.delta_columns:
            v = r[d]
            cls = "" if _missing(v) else "pos" if v > 0 else "neg" if v < 0 else ""
            cells.append(Cell(fmt(v, signed=True), _num(v), cls))
        if not paper:
            n = "" if _missing(r["n"]) else str(int(r["n"]))
            cells += [Cell(n or "-", n), Cell(r["commit"] or "-", r["commit"], "t mono"),
                      Cell(r["weights_sha"] or "-", r["weights_sha"], "t mono", title=r["weights"]),
                      Cell(r["created"] or "-", r["created"], "t")]
        row = Row(r["model"], r["kind"], cells, f"{r['source']} k-{r['kind']}")
        (ceiling if r["kind"] in REFERENCE_KINDS else rows).append(row)
    title = f"{t.paper_table}: {t.task}" if paper else f"{t.task} — {info.label}"
    return TableView(t.table_id, title, cols, rows, ceiling, info, list(t.datasets), list(t.notes),
                     [(label, note) for label, _, note in metrics if note], list(figures), list(breakdowns))


def breakdown_view(table_id: str, title: str, table: pd.DataFrame, figure=None) -> TableView:
    """Items x models as a table with one row per model and one column per item ("n/a" for no value)."""
    cols = [Column("model", "t")] + [Column(str(item), "", True) for item in table.index]
    rows = []
    for model in table.columns:
        cells = [Cell(model, model, "t")]
        for item in table.index:
            v = table.at[item, model]
            cells.append(Cell("n/a" if _missing(v) else fmt(v), _num(v), "na" if _missing(v) else ""))
        rows.append(Row(model, "", cells))
    safe = "".join(c if c.isalnum() else "-" for c in title)[:40]
    return TableView(f"{table_id}-b-{safe}", title, cols, rows, figures=[figure] if figure else [])


def summary_view(long: pd.DataFrame, infos: dict[str, ProtocolInfo]) -> TableView:
    """Model x five task headlines (measured rows only), each value with its interval and n."""
    tasks = [t for t in task_names() if summary_metrics(t)]  # the table as it is now (tasks added late too)
    specs = [(t, spec) for t in tasks for spec in summary_metrics(t)]
    cols = [Column("model", "t"), Column("kind", "t"), Column("protocol", "t")]
    cols += [Column(f"{t}: {spec.label} {'↑' if spec.higher_is_better else '↓'}", "", spec.higher_is_better)
             for t, spec in specs]
    mine = long[long["source"] == "reproduced"]
    multi_ds = mine["dataset"].nunique() > 1
    if multi_ds:
        cols.insert(3, Column("dataset", "t"))
    rows = []
    kind_order = ["oracle", "floor", "pretrained", "unknown", "random-init", "weight-free", "reference"]
    keys = mine.drop_duplicates(["model_key", "protocol_key", "dataset"])
    pkeys = list(dict.fromkeys(keys["protocol_key"]))
    keys = keys.assign(_p=keys["protocol_key"].map(pkeys.index),
                       _k=keys["kind"].map(lambda k: kind_order.index(k) if k in kind_order else 9))
    for _, k in keys.sort_values(["_p", "_k", "model"], kind="stable").iterrows():
        g = mine[(mine["model_key"] == k["model_key"]) & (mine["protocol_key"] == k["protocol_key"])
                 & (mine["dataset"] == k["dataset"])]
        info = infos.get(k["protocol_key"])
        label = info.label if info else k["protocol_key"]
        kind = KIND_LABELS.get(k["kind"], k["kind"])
        cells = [Cell(k["model"], k["model"], "t"), Cell(kind, k["kind"], "t kind"),
                 Cell(label, label, "t", title=k["protocol_key"])]
        if multi_ds:
            cells.append(Cell(k["dataset"], k["dataset"], "t"))
        for t, spec in specs:
            hit = g[(g["task"] == t) & (g["metric"] == spec.key)]
            if not len(hit):
                cells.append(Cell("-", ""))
                continue
            h, s = hit.iloc[0], spec.scale
            cell = _value_cell(h["value"] * s, h["std"] * s, h["ci_low"] * s, h["ci_high"] * s, h["ci_desc"],
                               False)
            if not _missing(h["n"]):
                cell.title = (cell.title + "; " if cell.title else "") + f"n = {int(h['n'])} test samples"
                cell.ci = (cell.ci + " " if cell.ci else "") + f"n={int(h['n'])}"
            cells.append(cell)
        rows.append(Row(k["model"], k["kind"], cells, f"reproduced k-{k['kind']}"))
    return TableView("summary", "Summary: headline metric per task", cols, rows)


def banner(long: pd.DataFrame) -> str | None:
    """The no-pretrained-weights warning, or None when some measured backbone row is pretrained."""
    mine = long[long["source"] == "reproduced"]
    if not len(mine) or has_pretrained_row(mine["kind"]):
        return None
    return NO_PRETRAINED


def paper_views(tables: list[GroupTable]) -> list[TableView]:
    """The paper's Tables 2-8 as views (each under its own protocol info)."""
    return [table_view(t, paper_protocol_info(t.protocol_key)) for t in tables]
