"""The report as plain data (what each table shows, cell by cell), shared by the HTML and Markdown writers.

Nothing here formats markup: values are formatted as text, and the writers escape every string
(the HTML templates by Jinja2's autoescape, Markdown by ``md_escape``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from leaderboard.catalog import metric_note
from leaderboard.protocols import ProtocolInfo, paper_protocol_info
from leaderboard.rowinfo import KIND_LABELS, REFERENCE_KINDS, SOURCE_LABELS, has_pretrained_row
from leaderboard.standing import gap_text, is_small_n, rank_text, ranks
from leaderboard.tables import GroupTable

NO_PRETRAINED = (
    "No measured backbone row in this report records pretrained weights (model.weights or "
    "model.checkpoint): each is a seeded random initialisation, weight-free, or does not say (see the "
    "kind column), so its numbers measure the protocol and the decoder, not a pretrained model. Probe "
    "real weights with --weights NAME=PATH."
)


def fmt(value, signed: bool = False) -> str:
    """Format a display value compactly (``-`` for missing).

    Example:
        >>> fmt(41.234), fmt(0.0123), fmt(float("nan")), fmt(2.5, signed=True), fmt(2.2e-06)
        ('41.23', '0.012', '-', '+2.50', '2.2e-06')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    v = float(value)
    a = abs(v)
    if 0 < a < 1e-4:  # a ceiling's near-zero error: two significant digits, never a bare 0.0000
        return f"{v:+.2g}" if signed else f"{v:.2g}"
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
    """One table cell: shown text, sort key, CSS classes, interval text, a tooltip and a last line
    (rank and n)."""

    text: str
    v: str = ""
    cls: str = ""
    ci: str = ""
    title: str = ""
    sub: str = ""


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
    verdicts: TableView | None = None


def _value_cell(v, sd, lo, hi, desc, best: bool) -> Cell:
    text = fmt(v) + ("" if _missing(sd) else f" ± {fmt(sd)}")
    ci = "" if _missing(lo) or _missing(hi) else f"[{fmt(lo)}, {fmt(hi)}]"
    return Cell(text, _num(v), "best" if best else "", ci, desc if ci else "")


def _bounds(frame: pd.DataFrame, label: str, n: int) -> list:
    return frame[label].tolist() if label in frame else [None] * n


def table_view(t: GroupTable, info: ProtocolInfo, figures=(), breakdowns=()) -> TableView:
    """A leaderboard (or paper) table as cells: oracle rows apart (ceiling), best marks on ranked rows."""
    paper = bool(t.paper_table)
    metrics = [(label, hib, metric_note(t.task, key)) for key, label, hib in t.metric_columns]
    gap = not paper and "gap" in t.rows and t.rows["gap"].notna().any()
    cols = [Column("model", "t")] + ([] if paper else [Column("source", "t"), Column("kind", "t"),
                                                       Column("rank", "", False)])
    cols += [Column("gap closed", "gap", True)] if gap else []
    cols += [Column("params"), Column("dataset", "t")] + ([] if paper else [Column("seeds", "t")])
    cols += [Column(label, "", hib, note) for label, hib, note in metrics]
    cols += [Column(d) for d, _ in t.delta_columns]
    if not paper:
        cols += [Column("n", "", None), Column("commit", "t"), Column("weights sha256", "t"),
                 Column("date", "t")]
    ranked = t.ranked()
    best = {}  # per column, the rows ranked first (shared where intervals do not separate them)
    for label, hib, _ in metrics:
        rk = ranks(t.rows[label].where(ranked).tolist(), _bounds(t.ci_low, label, len(t.rows)),
                   _bounds(t.ci_high, label, len(t.rows)), hib)
        if len({r for r in rk if r is not None}) > 1:  # a tie of every row marks nothing
            best[label] = {i for i, r in enumerate(rk) if r == 1}
    rank_texts = rank_text([None if _missing(r) else int(r) for r in t.rows["rank"]]) if not paper else []
    rows, ceiling = [], []
    for i, r in t.rows.iterrows():
        source = SOURCE_LABELS.get(r["source"], r["source"]) + (f" ({r['table']})" if r["table"] else "")
        cells = [Cell(r["model"], r["model"], "t", title=str(r["run_ids"] or ""))]
        if not paper:
            rank = "" if _missing(r["rank"]) else str(int(r["rank"]))
            kind = KIND_LABELS.get(r["kind"], r["kind"])
            cells += [Cell(source, source, "t"), Cell(kind, r["kind"], "t kind"), Cell(rank_texts[i], rank)]
            if gap:
                share = None if _missing(r["gap"]) else float(r["gap"])
                cells.append(Cell(gap_text(share), _num(share), "gap"))
        cells += [Cell(fmt_params(r["params"]), _num(r["params"])), Cell(r["dataset"], r["dataset"], "t")]
        if not paper:
            cells.append(Cell(seeds_text(r["seeds"]), r["seeds"], "t"))
        for label, _, _ in metrics:
            v = r[label]
            is_best = bool(ranked[i]) and i in best.get(label, ())
            lo = t.ci_low.at[i, label] if label in t.ci_low else None
            hi = t.ci_high.at[i, label] if label in t.ci_high else None
            cells.append(_value_cell(v, t.std.at[i, label], lo, hi, r["ci_desc"], is_best))
        for d, _ in t.delta_columns:
            v = r[d]
            cls = "" if _missing(v) else "pos" if v > 0 else "neg" if v < 0 else ""
            cells.append(Cell(fmt(v, signed=True), _num(v), cls))
        if not paper:
            n = "" if _missing(r["n"]) else str(int(r["n"]))
            small = is_small_n(r["n"])
            cells += [Cell((n or "-") + (" (small n)" if small else ""), n, "small" if small else ""),
                      Cell(r["commit"] or "-", r["commit"], "t mono"),
                      Cell(r["weights_sha"] or "-", r["weights_sha"], "t mono", title=r["weights"]),
                      Cell(r["created"] or "-", r["created"], "t")]
        row = Row(r["model"], r["kind"], cells, f"{r['source']} k-{r['kind']}")
        (ceiling if r["kind"] in REFERENCE_KINDS else rows).append(row)
    title = f"{t.paper_table}: {t.task}" if paper else f"{t.task} — {info.label}"
    notes = list(t.notes)
    first = set(t.rows.loc[t.rows["rank"] == 1, "kind"]) if not paper else set()
    if "random-init" in first and "pretrained" not in first:  # a shared first place needs no excuse
        notes.append(random_first_note([f"rank 1 by {t.task}'s headline"]))
    return TableView(t.table_id, title, cols, rows, ceiling, info, list(t.datasets), notes,
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


RANDOM_FIRST = (
    "A random-init row ranks first here ({where}). That is no sign that pretraining hurts: under a linear "
    "read-out a random network with more feature channels, a finer token grid or more local features can "
    "beat a small pretrained one (a random-features regression; docs/design/random_features.md"
    ": on the main job's split a random "
    "dinov2_small, 4x384 channels on 19x14 tokens, beats the shipped sapiens2_cpu_small, 4x192 channels on "
    "16x12 tokens, on seg, normal and albedo, and a random 2-layer conv net with as many features on the "
    "same grid beats it on seg, normal and pointmap). Compare a backbone with the floor and with its own "
    "random twin (the paired comparisons), not with another architecture's random row."
)

def seeds_text(seeds: str) -> str:
    """The seeds cell: how many seeds and which (a bare ``0`` reads like a count of none).

    Example:
        >>> seeds_text("0"), seeds_text("0,1,2"), seeds_text("")
        ('1 seed: 0', '3 seeds: 0, 1, 2', '-')
    """
    ids = [s for s in str(seeds or "").split(",") if s]
    if not ids:
        return "-"
    return f"{len(ids)} seed{'' if len(ids) == 1 else 's'}: {', '.join(ids)}"


def random_first_note(where: list[str]) -> str:
    """The note shown with a table where a random-init row ranks first (``where``: its columns)."""
    return RANDOM_FIRST.format(where=", ".join(where))


def banner(long: pd.DataFrame) -> str | None:
    """The no-pretrained-weights warning, or None when some measured backbone row is pretrained."""
    mine = long[long["source"] == "reproduced"]
    if not len(mine) or has_pretrained_row(mine["kind"]):
        return None
    return NO_PRETRAINED


def paper_views(tables: list[GroupTable]) -> list[TableView]:
    """The paper's Tables 2-8 as views (each under its own protocol info)."""
    return [table_view(t, paper_protocol_info(t.protocol_key)) for t in tables]
