"""Matplotlib figures for the report, returned as PNG bytes (embedded as base64 in the HTML page).

Per (task, protocol) table: the headline metric against parameter count, a bar comparison of all
rows, and per-class / per-part breakdowns. Every figure belongs to exactly one protocol group.

Rules the figures keep:

- no zooming into noise: value axes start at 0 (all our metrics are non-negative) and end above
  the largest value, so two numbers 0.01 apart never look like a trend;
- intervals (``intervals`` of the records) are drawn as error bars; without them, the std over seeds;
- names are never cut: long names wrap onto several lines; every kind of row (random init,
  weight-free, the GT-oracle ceiling, reported paper numbers) has its own style, named in the legend;
- a large leaderboard stays a page: a table's figures draw at most :data:`MAX_FIGURE_ROWS` rows (the
  best by the headline metric) and a breakdown figure at most :data:`MAX_BREAKDOWN_MODELS` models (the
  best by their mean), each title saying "top N of M"; every PNG has at most :data:`MAX_PIXELS` pixels
  (the resolution drops for a figure that would be larger). The tables always list every row.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd

from leaderboard.catalog import headline_ok_metrics
from leaderboard.report_view import fmt_params
from leaderboard.tables import GroupTable

#: colour, hatch and legend label of each kind of row
STYLES = {
    "pretrained": ("#1f6fd1", "", "measured: pretrained"),
    "unknown": ("#1f6fd1", "", "measured: weights not recorded"),
    "random-init": ("#9cc3f0", "//", "measured: random init"),
    "weight-free": ("#b8bec9", "..", "measured: weight-free"),
    "reference": ("#e08a1e", "", "reference system"),
    "oracle": ("#2e9d57", "xx", "ceiling: GT oracle"),
    "floor": ("#d14b3b", "--", "floor: no features"),
    "reported": ("#6b7280", "", "reported (paper)"),
}
WRAP = 34
MAX_FIGURE_ROWS = 40
MAX_BREAKDOWN_MODELS = 12
MAX_PIXELS = 4_000_000  # e.g. 2450 x 1630 px
_DPI = 110


@dataclass
class Figure:
    """A rendered figure: title, PNG bytes, the table it belongs to, and its kind.

    ``kind`` is ``"table"`` for a figure of the whole table and ``"breakdown"`` for a per-class /
    per-part figure, whose ``key`` is the title of its breakdown table; ``file`` is the PNG's name
    under the site's ``figures/`` once written.
    """

    title: str
    png: bytes
    table_id: str
    kind: str = "table"
    key: str = ""
    file: str = ""


def _mpl():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def text(value, limit: int | None = None) -> str:
    r"""A user string made safe for matplotlib: every ``$`` escaped (cut to ``limit`` characters if given).

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


def wrap(value, width: int = WRAP) -> str:
    """The whole name, wrapped onto lines of at most ``width`` characters (long words are split).

    Example:
        >>> print(wrap("a-very-long-model-name-without-spaces", 16))
        a-very-long-mode
        l-name-without-s
        paces
    """
    return "\n".join(textwrap.wrap(text(value), width, break_on_hyphens=False) or [""])


def _png(fig) -> bytes:
    """The figure as PNG, within :data:`MAX_PIXELS` (a lower resolution when it would be larger)."""
    plt = _mpl()
    fig.canvas.draw()  # the tight bounding box (legends outside the axes included) is known after a draw
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    w, h = (box.width, box.height) if box is not None else tuple(fig.get_size_inches())
    dpi = min(_DPI, 0.97 * (MAX_PIXELS / ((w + 0.2) * (h + 0.2))) ** 0.5)  # + savefig's 0.1 in padding
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _top_rows(t: GroupTable, rows: pd.DataFrame, label: str) -> tuple[pd.DataFrame, str]:
    """At most :data:`MAX_FIGURE_ROWS` of ``rows`` (the best by ``label``, in table order), a title note."""
    if len(rows) <= MAX_FIGURE_ROWS:
        return rows, ""
    spec = next(s for s in headline_ok_metrics(t.task) if s.label == label)
    vals = pd.to_numeric(rows[label], errors="coerce").to_numpy(dtype=float)
    key = np.where(np.isfinite(vals), -vals if spec.higher_is_better else vals, np.inf)
    keep = np.sort(np.argsort(key, kind="stable")[:MAX_FIGURE_ROWS])
    return rows.iloc[keep], f" (top {MAX_FIGURE_ROWS} of {len(rows)} by {label})"


def value_limits(values, errors_high=None) -> tuple[float, float]:
    """Axis limits for non-negative metrics: from 0 (or below the smallest negative value) to 8 % above
    the largest value (or its upper error), never a window around the data.

    Example:
        >>> [round(v, 3) for v in value_limits([4.651, 4.658])]
        [0.0, 5.031]
    """
    v = np.asarray(values, dtype=float)
    hi = v if errors_high is None else np.fmax(v, np.asarray(errors_high, dtype=float))
    finite = hi[np.isfinite(hi)]
    top = float(finite.max()) if finite.size else 1.0
    low = float(np.nanmin(v)) if np.isfinite(v).any() else 0.0
    bottom = min(0.0, low * 1.08)
    top = top * 1.08 if top > 0 else 1.0
    return bottom, top


def _kind(row) -> str:
    return "reported" if row["source"] == "reported" else str(row.get("kind") or "unknown")


def _row_label(row) -> str:
    tag = f" ({row['table'] or 'reported'})" if row["source"] == "reported" else ""
    return wrap(f"{row['model']}{tag}")


def _errors(t: GroupTable, label: str, rows: pd.DataFrame) -> np.ndarray | None:
    """2 x n error lengths: the interval where a row has one, else the std over seeds, else 0."""
    v = rows[label].to_numpy(dtype=float)
    def col(frame: pd.DataFrame) -> np.ndarray:
        if label not in frame:
            return np.full_like(v, np.nan)
        return frame.loc[rows.index, label].to_numpy(dtype=float)

    lo, hi, sd = col(t.ci_low), col(t.ci_high), col(t.std)
    has_ci = np.isfinite(lo) & np.isfinite(hi)
    below = np.where(has_ci, v - lo, np.nan_to_num(sd))
    above = np.where(has_ci, hi - v, np.nan_to_num(sd))
    err = np.clip(np.stack([below, above]), 0, None)
    return err if np.any(err > 0) else None


def _param_ticks(ax, params: pd.Series) -> None:
    """Readable log-axis ticks (0.11B, 22M): decades over a wide range, the data values otherwise."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

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
    """Headline metric against parameter count (log scale); rows without a count are horizontal lines."""
    specs = [s for s in headline_ok_metrics(t.task) if s.label in t.rows]
    if not specs:
        return None
    label = specs[0].label
    rows, note = _top_rows(t, t.rows[t.rows[label].notna()], label)
    params = pd.to_numeric(rows["params"], errors="coerce")
    pts, lines = rows[params > 0], rows[~(params > 0)]
    if not len(pts):
        return None
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    err = _errors(t, label, pts)
    for kind in dict.fromkeys(_kind(r) for _, r in pts.iterrows()):
        mask = np.array([_kind(r) == kind for _, r in pts.iterrows()])
        color, _, name = STYLES.get(kind, STYLES["unknown"])
        hollow = kind in ("random-init", "weight-free")
        x, y = pts["params"].astype(float)[mask], pts[label][mask]
        ax.errorbar(x, y, yerr=None if err is None else err[:, mask], fmt="s" if kind == "reported" else "o",
                    ms=6, color=color, mfc="white" if hollow else color, ecolor=color, capsize=2, label=name,
                    zorder=3, linestyle="none")
    for (_, r), yv in zip(pts.iterrows(), pts[label]):
        ax.annotate(wrap(r["model"], 22), (float(r["params"]), yv), fontsize=6.5, xytext=(4, 3),
                    textcoords="offset points")
    for _, r in lines.iterrows():
        kind = _kind(r)
        color, _, name = STYLES.get(kind, STYLES["unknown"])
        ax.axhline(r[label], color=color, linestyle="--" if kind == "oracle" else ":", linewidth=1.2,
                   label=f"{name}: {wrap(r['model'])} (no parameter count)")
    ax.set_xscale("log")
    _param_ticks(ax, pts["params"].astype(float))
    tops = rows[label].to_numpy(dtype=float)
    if err is not None:
        tops = np.concatenate([tops, pts[label].to_numpy(dtype=float) + err[1]])
    ax.set_ylim(*value_limits(tops))
    ax.set_xlabel("parameters")
    direction = " (higher is better)" if specs[0].higher_is_better else " (lower is better)"
    ax.set_ylabel(text(label) + direction)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title(wrap(f"{t.task}: {label} vs parameters{note}", 60), fontsize=9)
    return Figure(f"{t.task}: {label} vs parameters{note}", _png(fig), t.table_id)


def comparison_bars(t: GroupTable) -> Figure | None:
    """Horizontal bars of the headline metrics for every row, from 0, with interval (or std) error bars."""
    specs = [s for s in headline_ok_metrics(t.task) if s.label in t.rows and t.rows[s.label].notna().any()]
    if not specs:
        return None
    from matplotlib.patches import Patch

    plt = _mpl()
    rows, note = _top_rows(t, t.rows[t.rows[[s.label for s in specs]].notna().any(axis=1)], specs[0].label)
    labels = [_row_label(r) for _, r in rows.iterrows()]
    kinds = [_kind(r) for _, r in rows.iterrows()]
    lines = sum(lb.count("\n") + 1 for lb in labels)
    size = (3.2 * len(specs) + 2.6, 0.2 * lines + 0.12 * len(rows) + 1.6)
    fig, axes = plt.subplots(1, len(specs), figsize=size, squeeze=False)
    y = np.arange(len(rows))
    for ax, spec in zip(axes[0], specs):
        vals = rows[spec.label].to_numpy(dtype=float)
        err = _errors(t, spec.label, rows)
        ax.barh(y, np.nan_to_num(vals), xerr=err, color=[STYLES.get(k, STYLES["unknown"])[0] for k in kinds],
                hatch=None, edgecolor="#333333", linewidth=0.4, capsize=2)
        for bar, k in zip(ax.patches, kinds):
            bar.set_hatch(STYLES.get(k, STYLES["unknown"])[1])
        ax.set_yticks(y)
        ax.set_yticklabels(labels if ax is axes[0][0] else [], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(*value_limits(vals, None if err is None else vals + err[1]))
        ax.set_xlabel(text(spec.label) + (" ↑" if spec.higher_is_better else " ↓"), fontsize=8)
        ax.grid(True, axis="x", alpha=0.3)
    handles = [Patch(facecolor=STYLES[k][0], hatch=STYLES[k][1], edgecolor="#333333", label=STYLES[k][2])
               for k in STYLES if k in kinds]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=min(4, len(handles)),
               bbox_to_anchor=(0.5, -0.02 - 0.04 * ((len(handles) - 1) // 4)))
    fig.suptitle(wrap(f"{t.task}: comparison across backbones{note}", 80), fontsize=9)
    fig.tight_layout(rect=(0, 0.06 + 0.04 * ((len(handles) - 1) // 4), 1, 0.97))
    return Figure(f"{t.task}: comparison across backbones{note}", _png(fig), t.table_id)


def breakdown_bars(title: str, table: pd.DataFrame, table_id: str, ylabel: str) -> Figure:
    """Grouped bars: items (classes or parts) on the x axis, one bar per model (columns), axis from 0.

    Missing values (a class without ground truth) are left out (no bar), not drawn as 0. Of more than
    :data:`MAX_BREAKDOWN_MODELS` models, the best by their mean over the items are drawn (these
    breakdowns, IoU per class and AP per part, are higher-is-better), and the title says so.
    """
    plt = _mpl()
    key = title
    if len(table.columns) > MAX_BREAKDOWN_MODELS:
        best = table.mean(axis=0, skipna=True).fillna(-np.inf).sort_values(ascending=False, kind="stable")
        kept = [c for c in table.columns if c in set(best.index[:MAX_BREAKDOWN_MODELS])]
        title = f"{title} (top {MAX_BREAKDOWN_MODELS} of {len(table.columns)} models by their mean)"
        table = table[kept]
    items, models = list(table.index), list(table.columns)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * len(items) * max(1, len(models)) ** 0.5 + 2), 3.8))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(items))
    for i, m in enumerate(models):
        ax.bar(x + i * width - 0.4 + width / 2, table[m].to_numpy(dtype=float), width, label=wrap(m))
    ax.set_xticks(x)
    ax.set_xticklabels([text(i) for i in items], rotation=60 if len(items) > 6 else 0,
                       ha="right" if len(items) > 6 else "center", fontsize=7)
    ax.set_ylim(*value_limits(table.to_numpy(dtype=float).ravel()))
    ax.set_ylabel(text(ylabel), fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title(wrap(title, 80), fontsize=9)
    return Figure(title, _png(fig), table_id, "breakdown", key)


def figures_for(t: GroupTable, breakdowns: list[tuple[str, pd.DataFrame]] | None = None) -> list[Figure]:
    """Every figure of one table: metric vs params, comparison, one figure per shown breakdown.

    Args:
        t: the table.
        breakdowns: ``[(title, items x models)]`` in display units (``leaderboard.breakdowns``); the
            first one (IoU for seg) and pose's AP per part get a figure.
    """
    figs = [f for f in (metric_vs_params(t), comparison_bars(t)) if f is not None]
    shown = (breakdowns or [])[:1] + [b for b in (breakdowns or [])[1:] if b[0].startswith("AP per part")]
    for title, table in shown:
        if table.notna().any().any():
            figs.append(breakdown_bars(title, table, t.table_id, title))
    return figs
