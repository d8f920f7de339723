"""Build the leaderboard site: read records, add the paper's numbers, write Markdown, HTML and figures.

Output folder layout::

    SITE/index.html        self-contained page (inline CSS/JS, base64 figures)
    SITE/leaderboard.md    Markdown report referencing figures/*.png
    SITE/figures/*.png     the same figures as files
    SITE/leaderboard.csv   the long table (one row per model, task, protocol, dataset, metric)
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from leaderboard.merge import dedupe_records
from leaderboard.paper import load_paper_results, protocol_key
from leaderboard.plots import Figure, figures_for
from leaderboard.report_html import build_html
from leaderboard.report_md import build_markdown
from leaderboard.results import load_records
from leaderboard.tables import GroupTable, combine, group_tables, records_to_frame
from sapiens2.errors import BenchError
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
        if out[col].dtype == object:
            out[col] = out[col].map(lambda v: f"'{v}" if isinstance(v, str) and v.startswith(_FORMULA_START)
                                    else v)
    return out


def _render_figures(t: GroupTable, breakdowns, records: list[dict]) -> list[Figure]:
    try:
        return figures_for(t, breakdowns)
    except Exception as e:  # any drawing failure is reported with the records involved
        run_ids = {r for ids in t.rows["run_ids"] for r in str(ids).split()}
        where = "; ".join(f"{rec['model']['name']!r} ({rec.get('_path') or rec['run_id']})"
                          for rec in records if rec["run_id"] in run_ids) or "reported rows only"
        raise FigureError(f"figure of table {t.task} [{t.protocol_key}] failed: {type(e).__name__}: {e}; "
                          f"records: {where}") from e


def _seg_class_names() -> dict[str, str]:
    from sapiens2.reference import seg_classes29

    return {str(c["id"]): c["name"] for c in seg_classes29()["classes"]}


def record_breakdowns(records: list[dict]) -> dict[tuple[str, str], dict[str, pd.DataFrame]]:
    """Per-class / per-part breakdowns, averaged over seeds, per (task, protocol_key).

    Returns:
        ``{(task, protocol_key): {breakdown name: DataFrame(items x models)}}``; seg class ids are
        replaced by the 29 class names.
    """
    acc: dict[tuple[str, str], dict[str, dict[str, list[dict]]]] = {}
    for rec in records:
        bd = rec.get("breakdowns") or {}
        if not bd:
            continue
        key = (rec["task"], protocol_key(rec["protocol"]["kind"], rec["protocol"].get("protocol_id")))
        for name, items in bd.items():
            acc.setdefault(key, {}).setdefault(name, {}).setdefault(rec["model"]["name"], []).append(items)
    names = _seg_class_names()
    out: dict[tuple[str, str], dict[str, pd.DataFrame]] = {}
    for key, by_name in acc.items():
        for name, by_model in by_name.items():
            cols = {}
            for model, lists in by_model.items():
                frame = pd.DataFrame(lists, dtype=float)
                cols[model] = frame.mean(axis=0, skipna=True)
            table = pd.DataFrame(cols)
            if key[0] == "seg" and set(table.index) <= set(names):
                table.index = [names[i] for i in table.index]
            out.setdefault(key, {})[name] = table
    return out


def build_site(
    inputs: Iterable[str | os.PathLike],
    out: str | os.PathLike,
    include_paper: bool = False,
    title: str = "sapiens2-bench leaderboard",
    with_figures: bool = True,
    skipped: list[str] | None = None,
) -> dict[str, Path]:
    """Build the leaderboard from result files/folders.

    Args:
        inputs: result record files or folders (searched recursively; foreign JSON in folders skipped).
        out: output folder.
        include_paper: add the paper's reported numbers next to the reproduced ones.
        title: page title.
        with_figures: render matplotlib figures.
        skipped: when given, unreadable or invalid result files are left out and listed in it
            (``"path: reason"``); otherwise they are an error.

    Returns:
        ``{"html", "markdown", "csv"}`` paths.

    Raises:
        RecordError: an unreadable or invalid result file (every one named, with the reasons).
        DuplicateRunError: two different records with one run id.
        FigureError: a figure failed (the table and its records named).
        ValueError: nothing to report.
    """
    inputs = [str(p) for p in inputs]
    records, notes = dedupe_records(load_records(inputs, skip_foreign=True, skipped=skipped))
    long = records_to_frame(records)
    reported = load_paper_results() if include_paper else None
    if reported is not None and len(long):
        # the paper's numbers for the tasks and protocol kinds we have results for (probe results get
        # Table 2 as context, task-model results Tables 3-8)
        ours = set(zip(long["task"], long["protocol_kind"]))
        reported = reported[[pair in ours for pair in zip(reported["task"], reported["protocol_kind"])]]
    both = combine(long, reported)
    if not len(both):
        raise ValueError(f"no result records found in {', '.join(inputs) or '(no inputs)'}")
    tables: list[GroupTable] = group_tables(both, notes)
    breakdowns = record_breakdowns(records)
    out = Path(out)
    figures: dict[str, list[Figure]] = {}
    figure_files: dict[str, list[str]] = {}
    if with_figures:
        for t in tables:
            figs = _render_figures(t, breakdowns.get((t.task, t.protocol_key)), records)
            figures[t.table_id] = figs
            for n, f in enumerate(figs):
                name = f"{t.table_id}-{n}.png"
                atomic_write(out / "figures" / name, lambda tmp, b=f.png: Path(tmp).write_bytes(b))
                figure_files.setdefault(t.table_id, []).append(name)
    meta = {
        "title": title,
        "generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "n_records": len(records),
        "inputs": inputs,
        "include_paper": include_paper,
    }
    paths = {
        "html": write_text_atomic(out / "index.html", build_html(tables, figures, meta)),
        "markdown": write_text_atomic(out / "leaderboard.md",
                                      build_markdown(tables, meta, "figures", figure_files)),
        "csv": write_text_atomic(out / "leaderboard.csv", csv_safe(both).to_csv(index=False)),
    }
    return paths


def summary_lines(paths: dict[str, Path]) -> list[str]:
    """Human-readable lines saying where the report is."""
    return [f"{k:<8} {v}" for k, v in paths.items()]

