"""Markdown report: one table per (task, protocol), reported and reproduced rows side by side."""

from __future__ import annotations

import html
import math

from leaderboard.tables import GroupTable


def fmt(value, signed: bool = False) -> str:
    """Format a display value compactly (``-`` for missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    v = float(value)
    a = abs(v)
    digits = 1 if a >= 100 else 2 if a >= 1 or a == 0 else 3 if a >= 0.01 else 4
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def fmt_params(p) -> str:
    """Parameter count as ``0.398B`` / ``21.5M``."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    p = float(p)
    return f"{p / 1e9:.3f}B" if p >= 1e8 else f"{p / 1e6:.1f}M"


def md_escape(text) -> str:
    """Escape a user string for a Markdown table cell (HTML-escaped, pipes and newlines neutralised)."""
    s = html.escape(str(text), quote=True)
    for ch in "\\|`*_[]":
        s = s.replace(ch, "\\" + ch)
    return s.replace("\r", " ").replace("\n", " ")


def table_markdown(t: GroupTable) -> str:
    """One table as Markdown, with its protocol, datasets and notes above it."""
    lines = [f"### {md_escape(t.task)} — protocol `{t.protocol_key.replace('`', '')}`", ""]
    lines.append("Datasets: " + ", ".join(md_escape(d) for d in t.datasets) + "  ")
    for note in t.notes:
        lines.append(f"Note: {md_escape(note)}  ")
    lines.append("")
    metric_labels = [label for _, label, _ in t.metric_columns]
    delta_labels = [d for d, _ in t.delta_columns]
    header = ["source", "model", "params", "dataset", "seeds"] + metric_labels + delta_labels
    lines.append("| " + " | ".join(md_escape(h) for h in header) + " |")
    lines.append("|" + "---|" * len(header))
    for i, r in t.rows.iterrows():
        src = r["source"] + (f" ({r['table']})" if r["table"] else "")
        cells = [md_escape(src), md_escape(r["model"]), fmt_params(r["params"]), md_escape(r["dataset"]),
                 md_escape(r["seeds"] or "-")]
        for label in metric_labels:
            cell = fmt(r[label])
            sd = t.std.at[i, label] if label in t.std else float("nan")
            if not math.isnan(sd):
                cell += f" ± {fmt(sd)}"
            cells.append(cell)
        cells += [fmt(r[d], signed=True) for d in delta_labels]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def build_markdown(tables: list[GroupTable], meta: dict, figures_dir: str | None = None,
                   figure_files: dict[str, list[str]] | None = None) -> str:
    """The whole Markdown report.

    Args:
        tables: leaderboard tables.
        meta: ``{"title", "generated_utc", "n_records", "inputs": [...], "include_paper": bool}``.
        figures_dir: folder (relative to the report) holding figure PNGs, if written.
        figure_files: table id -> figure file names in ``figures_dir``.

    Returns:
        The Markdown text.
    """
    out = [f"# {md_escape(meta.get('title', 'sapiens2-bench leaderboard'))}", ""]
    paper = "; paper numbers included (marked reported)." if meta.get("include_paper") else "."
    out.append(f"Generated {md_escape(meta.get('generated_utc', ''))} from {meta.get('n_records', 0)} "
               f"result record(s){paper}")
    out += ["", "Tables are split by task and protocol: results of different protocols are never ranked "
            "together. Δ columns = reproduced − reported for the same model (display units).", ""]
    current = None
    for t in tables:
        if t.task != current:
            out += [f"## {md_escape(t.task)}", ""]
            current = t.task
        out.append(table_markdown(t))
        for name in (figure_files or {}).get(t.table_id, []):
            out.append(f"![{md_escape(name)}]({figures_dir}/{name})")
        out.append("")
    if not tables:
        out.append("No results.")
    return "\n".join(out) + "\n"
