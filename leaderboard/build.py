"""Build the leaderboard site: read records, add the paper's numbers, write Markdown, HTML and figures.

Output folder layout::

    SITE/index.html        self-contained page (Jinja2 templates; inline CSS/JS, base64 figures)
    SITE/leaderboard.md    Markdown report referencing figures/*.png (the same content, summary first)
    SITE/figures/*.png     the same figures as files
    SITE/leaderboard.csv   the long table (one row per model, task, protocol, dataset, metric)
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from leaderboard.breakdowns import display_breakdowns, record_breakdowns
from leaderboard.comparisons import comparisons_view, folded_comparisons
from leaderboard.merge import dedupe_records, model_name_key
from leaderboard.paper import load_paper_results
from leaderboard.plots import Figure, figures_for
from leaderboard.protocols import protocol_infos
from leaderboard.report_html import build_html
from leaderboard.report_md import build_markdown
from leaderboard.report_view import banner, breakdown_view, paper_views, table_view
from leaderboard.summary_view import summary_views
from leaderboard.tables import GroupTable, combine, group_tables, paper_tables, records_to_frame
from sapiens2.errors import BenchError
from sapiens2.records.results import load_records
from sapiens2.records.view import RecordView, record_views
from sapiens2.utils_io import atomic_write, write_text_atomic

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class FigureError(BenchError):
    """A figure of one table could not be drawn; the message names the table and its records."""


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell that a spreadsheet would run as a formula made inert.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'``
    (the usual neutralisation); numbers are left alone.

    Example:
        >>> csv_safe(pd.DataFrame({"model": ["=1+1", "ok"], "value": [-1.0, 2.0]})).values.tolist()
        [["'=1+1", -1.0], ['ok', 2.0]]
    """
    out = df.copy()
    for col in out.columns:
        # not `dtype == object`: pandas 3 stores text as the `str` dtype, which that test misses
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(lambda v: f"'{v}" if isinstance(v, str) and v.startswith(_FORMULA_START)
                                    else v)
    return out


def _render_figures(t: GroupTable, breakdowns, records: list[RecordView]) -> list[Figure]:
    try:
        return figures_for(t, breakdowns)
    except Exception as e:  # any drawing failure is reported with the records involved
        run_ids = {r for ids in t.rows["run_ids"] for r in str(ids).split()}
        where = "; ".join(f"{rec.model.name!r} ({rec.path or rec.run_id})"
                          for rec in records if rec.run_id in run_ids) or "reported rows only"
        raise FigureError(f"figure of table {t.task} [{t.protocol_key}] failed: {type(e).__name__}: {e}; "
                          f"records: {where}") from e


def build_site(
    inputs: Iterable[str | os.PathLike],
    out: str | os.PathLike,
    include_paper: bool = False,
    title: str = "sapiens2-bench leaderboard",
    with_figures: bool = True,
    skipped: list[str] | None = None,
    protocol_names: Mapping[str, str] | None = None,
    comparisons: list[dict] | None = None,
) -> dict[str, Path]:
    """Build the leaderboard from result files/folders.

    Args:
        inputs: result record files or folders (searched recursively; foreign JSON in folders skipped).
        out: output folder.
        include_paper: add the paper's reported numbers: next to the measured rows of the same
            protocol (with deltas), and every paper table (Tables 2-8) in a section of its own.
        title: page title.
        with_figures: render matplotlib figures.
        skipped: when given, unreadable or invalid result files are left out and listed in it
            (``"path: reason"``); otherwise they are an error.
        protocol_names: protocol id -> human-readable name for the protocols the caller knows
            (``{"probe-v3-...": "probe v3 (default)"}``); others are named from their stored config.
        comparisons: paired comparisons of two backbones (plain dicts of the probe's paired bootstrap,
            :mod:`leaderboard.comparisons`), shown in a section of their own.

    Returns:
        ``{"html", "markdown", "csv"}`` paths.

    Raises:
        RecordError: an unreadable or invalid result file (every one named, with the reasons).
        DuplicateRunError: two different records with one run id.
        FigureError: a figure failed (the table and its records named).
        ValueError: nothing to report.
    """
    inputs = [str(p) for p in inputs]
    compared = comparisons_view(comparisons)  # bad comparison data fails before anything is read
    records, notes = dedupe_records(record_views(load_records(inputs, skip_foreign=True, skipped=skipped)))
    long = records_to_frame(records, deduped=True)
    if not len(long):
        raise ValueError(f"no result records found in {', '.join(inputs) or '(no inputs)'}")
    reported = None
    if include_paper:
        # reported rows join the tables of the same (task, protocol) for deltas; the paper section
        # below shows every paper table whatever the records are
        reported = load_paper_results()
        ours = set(zip(long["task"], long["protocol_key"]))
        reported = reported[[pair in ours for pair in zip(reported["task"], reported["protocol_key"])]]
    # the comparisons name record models; the tables show them as rows (``name (random init)``)
    shown_as = {(r.task, r.protocol.id or "", r.model.name): model_name_key(r)[0] for r in records}
    folded = folded_comparisons(comparisons, shown_as)
    tables: list[GroupTable] = group_tables(combine(long, reported), notes, folded)
    printed = paper_tables(load_paper_results(as_printed=True)) if include_paper else []
    breakdowns = record_breakdowns(records)
    infos = protocol_infos(records, protocol_names)
    out = Path(out)
    views = []
    for t in tables:
        shown = display_breakdowns(t, breakdowns.get((t.task, t.protocol_key)))
        figs = _render_figures(t, shown, records) if with_figures else []
        for n, f in enumerate(figs):
            f.file = f"{t.table_id}-{n}.png"
            atomic_write(out / "figures" / f.file, lambda tmp, b=f.png: Path(tmp).write_bytes(b))
        by_key = {f.key: f for f in figs if f.kind == "breakdown"}
        bviews = [breakdown_view(t.table_id, name, table, by_key.get(name)) for name, table in shown]
        views.append(table_view(t, infos[t.protocol_key], figs, bviews))
    sections = [{"task": task, "tables": [v for t, v in zip(tables, views) if t.task == task]}
                for task in dict.fromkeys(t.task for t in tables)]
    paper = paper_views(printed)
    protocols = list(infos.values()) + list({v.protocol.key: v.protocol for v in paper}.values())
    page = {
        "title": title,
        "generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "n_records": len(records),
        "inputs": inputs,
        "banner": banner(long),
        "summaries": summary_views(long, infos, folded),
        "sections": sections,
        "paper": paper,
        "protocols": protocols,
        "comparisons": compared,
    }
    paths = {
        "html": write_text_atomic(out / "index.html", build_html(page)),
        "markdown": write_text_atomic(out / "leaderboard.md", build_markdown(page, "figures")),
        "csv": write_text_atomic(out / "leaderboard.csv",
                                 csv_safe(combine(long, reported)).to_csv(index=False)),
    }
    return paths


def summary_lines(paths: dict[str, Path]) -> list[str]:
    """Human-readable lines saying where the report is."""
    return [f"{k:<8} {v}" for k, v in paths.items()]

