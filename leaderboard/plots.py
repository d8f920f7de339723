"""Matplotlib figures for the report, returned as PNG bytes (embedded as base64 in the HTML page).

Per (task, protocol) table: the headline metric against parameter count, a bar comparison of all
rows, and per-class / per-part breakdowns when the records carry them (pose parts come from the
``part/AP`` metrics). Every figure belongs to exactly one protocol group.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd

from leaderboard.catalog import POSE_PARTS, headline_metrics
from leaderboard.tables import GroupTable

_COLORS = {"reported": "#8a8f98", "reproduced": "#1f6fd1"}


@dataclass
class Figure:
    """A rendered figure: title, PNG bytes and the group it belongs to."""

    title: str
    png: bytes
    table_id: str


def _mpl():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def text(value, limit: int | None = None) -> str:
    r"""A user string made safe for matplotlib: cut to ``limit`` characters, every ``$`` escaped.

    Matplotlib parses text with an even number of unescaped ``$`` as mathtext, and a malformed
    formula (a model named ``$\frac{1$``) aborts the figure; escaped, it is drawn as typed.

    Example:
        >>> print(text(r"$\frac{1$ model"))
        \$\frac{1\$ model
    """
    s = str(value)
    if limit is not None:
        s = s[:limit]
    return s.replace("$", r"\$")


def _png(fig) -> bytes:
    plt = _mpl()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _label(row) -> str:
    tag = "" if row["source"] == "reproduced" else " (reported)"
    return text(f"{row['model']}{tag}", 48)


def _param_ticks(ax, params: pd.Series) -> None:
    """Readable log-axis ticks (0.11B, 22M): decades over a wide range, the data values otherwise."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from leaderboard.report_md import fmt_params

    lo, hi = float(params.min()), float(params.max())
    if np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) < 1:
        values = np.array(sorted(set(params)))
        keep = [values[0]]
        for v in values[1:]:  # at least a factor 1.5 apart so that labels do not overlap
            if v / keep[-1] >= 1.5:
                keep.append(v)
        ax.set_xticks(keep)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_params(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=7)


def metric_vs_params(t: GroupTable) -> Figure | None:
    """Headline metric against parameter count (log scale), reported and reproduced marked apart."""
    specs = [s for s in headline_metrics(t.task) if s.label in t.rows]
    if not specs:
        return None
    label = specs[0].label
    params = pd.to_numeric(t.rows["params"], errors="coerce")
    d = t.rows[(params > 0) & t.rows[label].notna()]
    if not len(d):
        return None
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(5.6, 3.4))
    for source, g in d.groupby("source"):
        ax.scatter(g["params"].astype(float), g[label], s=36, color=_COLORS.get(source, "k"), label=source,
                   marker="o" if source == "reproduced" else "s", zorder=3)
        for _, r in g.iterrows():
            ax.annotate(text(r["model"], 24), (float(r["params"]), r[label]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    _param_ticks(ax, d["params"].astype(float))
    ax.set_xlabel("parameters")
    direction = " (higher is better)" if specs[0].higher_is_better else " (lower is better)"
    ax.set_ylabel(text(label) + direction)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(text(f"{t.task}: {label} vs parameters [{t.protocol_key}]"), fontsize=9)
    return Figure(f"{t.task} [{t.protocol_key}]: {label} vs parameters", _png(fig), t.table_id)


def comparison_bars(t: GroupTable) -> Figure | None:
    """Horizontal bars of the headline metrics for every row of the table (std over seeds as error bars)."""
    specs = [s for s in headline_metrics(t.task) if s.label in t.rows and t.rows[s.label].notna().any()]
    if not specs:
        return None
    plt = _mpl()
    shown = t.rows[[s.label for s in specs]].notna().any(axis=1)
    rows, std = t.rows[shown], t.std[shown]
    n = len(rows)
    fig, axes = plt.subplots(1, len(specs), figsize=(3.4 * len(specs) + 1.6, 0.32 * n + 1.4), squeeze=False)
    labels = [_label(r) for _, r in rows.iterrows()]
    colors = [_COLORS.get(s, "k") for s in rows["source"]]
    for ax, spec in zip(axes[0], specs):
        vals = rows[spec.label].to_numpy(dtype=float)
        err = std[spec.label].to_numpy(dtype=float) if spec.label in std else None
        y = np.arange(n)
        ax.barh(y, np.nan_to_num(vals), xerr=None if err is None else np.nan_to_num(err), color=colors)
        ax.set_yticks(y)
        ax.set_yticklabels(labels if ax is axes[0][0] else [], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(text(spec.label) + (" ↑" if spec.higher_is_better else " ↓"), fontsize=8)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(text(f"{t.task} [{t.protocol_key}]: comparison across backbones"), fontsize=9)
    return Figure(f"{t.task} [{t.protocol_key}]: comparison across backbones", _png(fig), t.table_id)


def _pose_parts(t: GroupTable) -> pd.DataFrame | None:
    cols = {p: f"{p} AP %" for p in POSE_PARTS[1:] if f"{p} AP %" in t.rows}
    if not cols:
        return None
    d = t.rows[[c for c in cols.values()]].copy()
    d.columns = list(cols)
    d.index = [_label(r) for _, r in t.rows.iterrows()]
    d = d.dropna(how="all")
    return d.T if len(d) else None


def breakdown_bars(title: str, table: pd.DataFrame, table_id: str, ylabel: str) -> Figure:
    """Grouped bars: items (classes or parts) on the x axis, one bar per model (columns)."""
    plt = _mpl()
    items, models = list(table.index), list(table.columns)[:8]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.34 * len(items) * max(1, len(models)) ** 0.5 + 2), 3.6))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(items))
    for i, m in enumerate(models):
        ax.bar(x + i * width - 0.4 + width / 2, np.nan_to_num(table[m].to_numpy(dtype=float)), width,
               label=text(m, 40))
    ax.set_xticks(x)
    ax.set_xticklabels([text(i, 18) for i in items], rotation=60 if len(items) > 6 else 0, ha="right",
                       fontsize=7)
    ax.set_ylabel(text(ylabel), fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title(text(title), fontsize=9)
    return Figure(title, _png(fig), table_id)


def figures_for(t: GroupTable, breakdowns: dict[str, pd.DataFrame] | None = None) -> list[Figure]:
    """Every figure of one table: metric vs params, comparison, breakdowns (pose parts, per-class)."""
    figs = [f for f in (metric_vs_params(t), comparison_bars(t)) if f is not None]
    parts = _pose_parts(t) if t.task == "pose" else None
    if parts is not None:
        figs.append(breakdown_bars(f"pose [{t.protocol_key}]: AP per part", parts, t.table_id, "AP %"))
    # one per-class figure per table: IoU when there is one (seg records carry six per-class stats)
    names = sorted(breakdowns or {}, key=lambda n: (not n.startswith("IoU"), n))[:1]
    for name in names:
        title = f"{t.task} [{t.protocol_key}]: {name}"
        figs.append(breakdown_bars(title, breakdowns[name], t.table_id, name))
    return figs
