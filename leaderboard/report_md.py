"""Markdown report: the same content as the HTML page (``leaderboard.report_view``), summary first.

Order: title and banner, the summaries (one per protocol: model x task headlines), the protocols with their
knobs, one table per (task, protocol) with its notes, figures and per-class tables, then the
paper's Tables 2-8. Every user string goes through ``md_escape``.
"""

from __future__ import annotations

import html
import re

from leaderboard.report_view import TableView, fmt, fmt_params

__all__ = ["build_markdown", "fmt", "fmt_params", "md_escape", "neutralise_controls", "table_markdown"]

# C0/C1 control characters (but tab, newline and carriage return), and the bidirectional formatting
# and line-separator characters: a model named "rtl\u202etxt.exe" would display as "rtlexe.txt".
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def neutralise_controls(text: str) -> str:
    """``text`` with every control or bidi formatting character shown as ``[U+XXXX]``.

    Safe in HTML text and attributes, Markdown and JSON strings alike (no character to escape).

    Example:
        >>> neutralise_controls("rtl\u202etxt.exe\x07")
        'rtl[U+202E]txt.exe[U+0007]'
    """
    return _UNSAFE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def md_escape(text) -> str:
    """Escape a user string for a Markdown table cell (HTML-escaped, pipes and newlines neutralised).

    Example:
        >>> md_escape("a|b <i>")
        'a\\\\|b &lt;i&gt;'
    """
    s = html.escape(str(text), quote=True)
    for ch in "\\|`*_[]":
        s = s.replace(ch, "\\" + ch)
    return s.replace("\r", " ").replace("\n", " ")


def _cell(c) -> str:
    return md_escape(c.text + (f" {c.ci}" if c.ci else "") + (f" ({c.sub})" if c.sub else ""))


def table_markdown(tv: TableView) -> str:
    """One table view as a Markdown table (ceiling rows first, marked)."""
    header = [md_escape(c.label) + (" †" if c.note else "") for c in tv.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in tv.ceiling:
        cells = [_cell(c) for c in r.cells]
        cells[0] = f"*{cells[0]} ({'floor' if r.kind == 'floor' else 'ceiling'})*"
        lines.append("| " + " | ".join(cells) + " |")
    for r in tv.rows:
        lines.append("| " + " | ".join(_cell(c) for c in r.cells) + " |")
    return "\n".join(lines) + "\n"


def _section(tv: TableView, figures_dir: str | None) -> list[str]:
    out = [f"### {md_escape(tv.title)}", ""]
    if tv.protocol is not None:
        p = tv.protocol
        out.append(f"Protocol: {md_escape(p.label)}" + (f" `{p.short_hash}`" if p.short_hash else "")
                   + (f" — {md_escape(p.description)}" if p.description else "") + "  ")
    out += ["Datasets: " + ", ".join(md_escape(d) for d in tv.datasets), "", table_markdown(tv)]
    if tv.verdicts is not None:
        out += [f"{md_escape(tv.verdicts.title)}:", "", table_markdown(tv.verdicts)]
        out += [f"- {md_escape(note)}" for note in tv.verdicts.notes] + [""]
    for label, note in tv.metric_notes:
        out.append(f"- † **{md_escape(label)}**: {md_escape(note)}")
    for note in tv.notes:
        out.append(f"- Note: {md_escape(note)}")
    out.append("")
    for f in tv.figures:
        if f.kind == "table" and figures_dir and f.file:
            out += [f"![{md_escape(f.title)}]({figures_dir}/{f.file})", ""]
    for b in tv.breakdowns:
        out += [f"#### {md_escape(b.title)}", "", table_markdown(b)]
        for f in b.figures:
            if figures_dir and f.file:
                out += [f"![{md_escape(f.title)}]({figures_dir}/{f.file})", ""]
    if tv.breakdowns:
        out += ["n/a: no value for the class (0/0: no ground-truth pixels in the test set; for IoU also "
                "never predicted).", ""]
    return out


def build_markdown(page: dict, figures_dir: str | None = None) -> str:
    """The whole Markdown report.

    Args:
        page: the page data (``leaderboard.build``; see ``leaderboard.report_html.build_html``).
        figures_dir: folder (relative to the report) holding figure PNGs, if written.

    Returns:
        The Markdown text.
    """
    out = [f"# {md_escape(page['title'])}", ""]
    out.append(f"Generated {md_escape(page['generated_utc'])} from {page['n_records']} result record(s). "
               "Rows are *measured* (made by this code) or *reported* (the paper's numbers); results of "
               "different protocols are never ranked together.")
    out.append("")
    if page.get("banner"):
        out += [f"> **No pretrained weights.** {md_escape(page['banner'])}", ""]
    out += ["## Summary: headline metric per task, one table per protocol", ""]
    for sv in page["summaries"]:
        out += _section(sv, None)
    if not page["summaries"]:
        out += ["No measured results.", ""]
    out += ["Each cell: the task's headline metric (pose: the probe's EPE in pixels of the 1024x768 crop, "
            "and the official AP; units: px pixels, deg degrees, cm centimetres, % percent), its interval in "
            "brackets, its rank and n (test samples). A rank is 1 + the number of rows better beyond both "
            "intervals (or the paired interval where the two were compared paired): rows no interval "
            "separates share it (=1). gap closed: (value - floor) / (ceiling - floor), 0% at the floor, "
            "100% at the ceiling. Numbers of different protocols and label sets are never in one table; the "
            "ceiling and floor rows (first) are references, never ranked, and so is a reference system.", ""]
    if page.get("comparisons"):
        cv = page["comparisons"]
        out += [f"## {md_escape(cv['title'])}", ""]
        out += ["| " + " | ".join(md_escape(c) for c in cv["columns"]) + " |",
                "|" + "---|" * len(cv["columns"])]
        out += ["| " + " | ".join(md_escape(r[k]) for k in cv["fields"]) + " |" for r in cv["rows"]]
        out += ["", "A - B: the difference of the metric, with the percentile interval of the differences "
                "over the same resampled test images for both backbones.", ""]
        out += [f"- Note: {md_escape(note)}" for note in cv.get("notes", [])] + [""]
    out += ["## Protocols", ""]
    for p in page["protocols"]:
        out.append(f"<details><summary>{md_escape(p.label)}" + (f" {p.short_hash}" if p.short_hash else "")
                   + f" ({len(p.knobs)} knobs)</summary>")
        out.append("")
        for name, value in p.knobs:
            mark = " (differs)" if name in p.differs else ""
            out.append(f"- `{name.replace('`', '')}` = {md_escape(value)}{mark}")
        out += ["", "</details>", ""]
    for s in page["sections"]:
        out += [f"## {md_escape(s['task'])}", ""]
        for tv in s["tables"]:
            out += _section(tv, figures_dir)
    if page.get("paper"):
        out += ["## The paper's tables (reported)", ""]
        for tv in page["paper"]:
            out += _section(tv, None)
    return neutralise_controls("\n".join(out) + "\n")
