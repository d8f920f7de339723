"""Leaderboard tables with pandas: records -> long frame -> one wide table per (task, protocol).

Rows of different protocols are never put in one table: the grouping key is ``(task,
protocol_key)`` where ``protocol_key`` is ``eval`` (or ``eval:<id>``) for task models and
``probe:<protocol_id>`` for probes. Seeds of one (model, task, protocol, dataset) are averaged
(mean and std); nothing else is ever averaged.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from leaderboard.catalog import (
    TASK_METRICS,
    MetricSpec,
    board_tasks,
    canonical_metric,
    headline_metric,
    headline_ok_metrics,
    is_nonfinite_count,
    metric_note,
)
from leaderboard.merge import dataset_labels, dedupe_records, model_name_key
from leaderboard.paper import MAPPED_TABLES
from leaderboard.rowinfo import REFERENCE_KINDS, UNRANKED_KINDS, record_intervals, record_provenance
from leaderboard.standing import (
    all_zero_note,
    gap_closed,
    is_small_n,
    paired_winners,
    ranks,
    small_n_note,
    zero_interval_note,
)
from sapiens2.records.view import Record, record_views

LONG_COLUMNS = [
    "source", "table", "model", "model_key", "params", "task", "protocol_kind", "protocol_id",
    "protocol_key", "dataset", "metric", "value", "std", "n_seeds", "seeds", "run_ids", "paths",
    # what the row is and where it comes from (leaderboard.rowinfo); the interval of the value
    "kind", "n", "commit", "weights_sha", "weights", "created", "ci_low", "ci_high", "ci_desc",
]
_JOINED = ("commit", "weights_sha", "weights", "created")


def _task_rank(task: str) -> int:
    """The task's place in the report: the task table's order, then the tasks only records declare."""
    order = board_tasks()
    return order.index(task) if task in order else len(order)


def records_to_frame(records: list[Record], notes: list[tuple[str, str, str]] | None = None,
                     deduped: bool = False) -> pd.DataFrame:
    """One row per (record, metric), then seeds merged: mean over single-seed records, std across them.

    Records are first deduplicated (``leaderboard.merge``: a run counts once, repeated seeds are
    one seed, datasets are told apart by content hash) unless the caller did it (``deduped``).
    Aggregate records (several seeds, ``metrics_std``) are used only when no single-seed record of
    the same group exists, so a seed is never counted twice.

    Args:
        records: validated result records (or their views).
        notes: when given, ``(task, protocol_key, text)`` notes about dropped repeats are appended.
        deduped: the records are the output of :func:`~leaderboard.merge.dedupe_records` already.

    Returns:
        The long frame (``LONG_COLUMNS``).
    """
    if not deduped:
        records, merge_notes = dedupe_records(records)
        if notes is not None:
            notes.extend(merge_notes)
    views = record_views(records)
    labels = dataset_labels(views)
    rows = []
    for rec in views:
        proto = rec.protocol
        name, key = model_name_key(rec)
        base = {
            "source": "reproduced", "table": "", "model": name,
            "model_key": key, "params": rec.model.params,
            "task": rec.task, "protocol_kind": proto.kind, "protocol_id": proto.id,
            "protocol_key": proto.key,
            "dataset": labels[rec.dataset.key], "seeds": rec.seeds,
            "aggregate": len(rec.seeds) > 1, "run_id": rec.run_id, "path": rec.path or "",
        }
        base.update(record_provenance(rec))
        intervals = record_intervals(rec)
        std = rec.metrics_std
        metrics: dict[str, tuple] = {}
        for raw, value in rec.metrics.items():
            metric, alias = canonical_metric(rec.task, raw)
            if metric not in metrics or not alias:  # an explicit name wins over an alias
                metrics[metric] = (value, std.get(raw))
        for metric, (value, sd) in metrics.items():
            rows.append({**base, "metric": metric, "value": np.nan if value is None else float(value),
                         "std_given": sd, "interval": intervals.get(metric)})
    if not rows:
        return pd.DataFrame(columns=LONG_COLUMNS)
    df = pd.DataFrame(rows)
    keys = ["model_key", "task", "protocol_key", "dataset"]
    has_single = df[~df["aggregate"]].groupby(keys).size()
    single_keys = set(has_single.index)
    df = df[~df["aggregate"] | ~df[keys].apply(tuple, axis=1).isin(single_keys)]
    out = []
    for _, g in df.groupby(keys + ["metric"], sort=False, dropna=False):
        first = g.iloc[0]
        seeds = sorted({s for t in g["seeds"] for s in t})
        if first["aggregate"]:
            value, std = first["value"], first["std_given"]
        else:
            value = g["value"].mean()
            std = g["value"].std(ddof=1) if len(g) > 1 else np.nan
        # an interval belongs to one record: shown for a single record (or an aggregate), not for a
        # mean over per-seed records (whose spread is the std over seeds)
        iv = first["interval"] if len(g) == 1 else None
        ns = sorted({int(n) for n in g["n"] if n is not None and not pd.isna(n)})
        out.append({
            **{c: first[c] for c in ["source", "table", "model", "model_key", "params", "task",
                                     "protocol_kind", "protocol_id", "protocol_key", "dataset", "metric",
                                     "kind"]},
            "value": value, "std": np.nan if std is None else std, "n_seeds": len(seeds),
            "seeds": ",".join(map(str, seeds)), "run_ids": " ".join(g["run_id"]),
            "paths": " ".join(p for p in g["path"] if p),
            **{c: " ".join(sorted({v for v in g[c] if v})) for c in _JOINED},
            "n": ns[0] if len(ns) == 1 else np.nan,
            "ci_low": iv["low"] if iv else np.nan, "ci_high": iv["high"] if iv else np.nan,
            "ci_desc": interval_text(iv) if iv else "",
        })
    return pd.DataFrame(out, columns=LONG_COLUMNS)


def interval_text(iv: dict) -> str:
    """How an interval was made, in words.

    Example:
        >>> interval_text({"level": 0.95, "method": "bootstrap", "resamples": 1000, "n": 40})
        '95% bootstrap interval (1000 resamples of the 40 test images)'
    """
    level = f"{100 * iv['level']:g}% " if iv.get("level") else ""
    if iv.get("method") == "bootstrap":
        extra = f"{iv['resamples']} resamples" if iv.get("resamples") else "resamples"
        return f"{level}bootstrap interval ({extra} of the {iv.get('n', '?')} test images)"
    return f"{level}interval over {iv.get('method') or 'unknown method'}"


def combine(reproduced: pd.DataFrame, reported: pd.DataFrame | None) -> pd.DataFrame:
    """Stack reproduced and (optionally) reported long frames with the same columns."""
    frames = [reproduced]
    if reported is not None and len(reported):
        rep = reported.assign(std=np.nan, n_seeds=0, seeds="", run_ids="", paths="", kind="reported",
                              n=np.nan, commit="", weights_sha="", weights="", created="", ci_low=np.nan,
                              ci_high=np.nan, ci_desc="")
        frames.append(rep[LONG_COLUMNS])
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=LONG_COLUMNS)
    with warnings.catch_warnings():  # all-NaN std/seed columns of the reported rows are intended
        warnings.simplefilter("ignore", FutureWarning)
        return pd.concat(frames, ignore_index=True)


@dataclass
class GroupTable:
    """One leaderboard table: a task under one protocol.

    Attributes:
        task: task name.
        protocol_key: grouping key (see ``leaderboard.paper.protocol_key``).
        rows: wide frame, one row per (source, model, dataset); metric columns hold display values;
            ``kind`` (``leaderboard.rowinfo``), ``rank`` (by the task's headline metric, among measured
            rows other than the references: 1 + the rows better beyond both intervals, so rows that no
            interval separates share one, :mod:`leaderboard.standing`; NaN otherwise), ``gap`` (the
            share of the floor-to-oracle gap closed on the headline; NaN without both) and the
            provenance columns.
        std: same shape as the metric columns of ``rows`` with the std over seeds (display units).
        metric_columns: (record key, label, higher_is_better) of the shown metric columns.
        delta_columns: (label of the delta column, metric label) pairs.
        datasets: distinct datasets in the table.
        notes: warnings to show with the table.
        ci_low, ci_high: like ``std``: the interval bounds of each value (display units; NaN without one).
        ci_desc: per row, how its intervals were made ("" without).
        paper_table: for a table of the paper's numbers, its name (``"Table 4"``); "" otherwise.
    """

    task: str
    protocol_key: str
    rows: pd.DataFrame
    std: pd.DataFrame
    metric_columns: list[tuple[str, str, bool]]
    delta_columns: list[tuple[str, str]]
    datasets: list[str]
    notes: list[str] = field(default_factory=list)
    ci_low: pd.DataFrame = field(default_factory=pd.DataFrame)
    ci_high: pd.DataFrame = field(default_factory=pd.DataFrame)
    paper_table: str = ""

    @property
    def table_id(self) -> str:
        """A DOM-safe identifier."""
        name = f"{self.task}-paper-{self.paper_table}" if self.paper_table and self.protocol_key == "eval" \
            else f"{self.task}-{self.protocol_key}"
        safe = "".join(c if c.isalnum() else "-" for c in name)
        return f"t-{safe}"[:80]

    def ranked(self) -> pd.Series:
        """Mask of the rows that are ranked (measured; not the ceiling, floor or a reference system)."""
        return (self.rows["source"] == "reproduced") & ~self.rows["kind"].isin(UNRANKED_KINDS)


def group_tables(long: pd.DataFrame, notes: list[tuple[str, str, str]] | None = None,
                 verdicts: list[dict] | None = None) -> list[GroupTable]:
    """Split the long frame into one ``GroupTable`` per (task, protocol_key), tasks in canonical order.

    Args:
        long: the long frame (``records_to_frame`` / ``combine``).
        notes: ``(task, protocol_key, text)`` notes (from ``records_to_frame``) added to their table.
        verdicts: paired comparisons (:func:`leaderboard.comparisons.folded_comparisons`): they decide
            the headline ranks of the pairs they cover.
    """
    tables = []
    if not len(long):
        return tables
    groups = long.groupby(["task", "protocol_key"], sort=False)
    ours = set(long.loc[long["source"] == "reproduced", "protocol_key"])
    # per task: tables with our results first (the official eval, then probes, then other eval protocols
    # such as reference systems'), reported-only tables last
    order = sorted(groups.groups,
                   key=lambda k: (_task_rank(k[0]), k[1] not in ours, _protocol_rank(k[1]), k[1]))
    for task, pkey in order:
        table = _wide(task, pkey, groups.get_group((task, pkey)), verdicts)
        table.notes += [text for t, k, text in notes or [] if (t, k) == (task, pkey)]
        tables.append(table)
    return tables


def _protocol_rank(pkey: str) -> int:
    return 0 if pkey == "eval" else 1 if pkey.startswith("probe:") else 2


def _wide(task: str, pkey: str, g: pd.DataFrame, verdicts: list[dict] | None = None) -> GroupTable:
    present = set(g["metric"])
    specs = [s for s in TASK_METRICS.get(task, []) if s.key in present]
    nonfinite = [MetricSpec(m, m, False) for m in sorted(present) if is_nonfinite_count(m)]
    if not specs:  # unknown metrics only: show them as they are, undirected
        specs = [MetricSpec(m, m, True) for m in sorted(present) if not is_nonfinite_count(m)] or nonfinite
    if specs is not nonfinite:
        specs += nonfinite  # a count of missing predictions is shown wherever a record has one
    id_cols = ["source", "model", "model_key", "params", "dataset", "table", "seeds", "run_ids", "kind", "n",
               "commit", "weights_sha", "weights", "created"]
    ident = g.drop_duplicates(["source", "model_key", "dataset"])[id_cols].reset_index(drop=True)
    rows = ident.copy()
    frames = {k: pd.DataFrame(index=rows.index) for k in ("std", "ci_low", "ci_high")}
    lookup = {(r.source, r.model_key, r.dataset, r.metric): r for r in g.itertuples()}
    desc = {}
    for s in specs:
        found = [lookup.get((r.source, r.model_key, r.dataset, s.key)) for r in ident.itertuples()]
        rows[s.label] = [np.nan if f is None else f.value * s.scale for f in found]
        for k, frame in frames.items():
            frame[s.label] = [np.nan if f is None else getattr(f, k) * s.scale for f in found]
        for i, f in enumerate(found):
            if f is not None and f.ci_desc:
                desc.setdefault(i, f.ci_desc)
    rows["ci_desc"] = [desc.get(i, "") for i in range(len(rows))]
    deltas = []
    reported = rows[rows["source"] == "reported"]
    if len(reported) and (rows["source"] == "reproduced").any():
        by_model = reported.drop_duplicates("model_key").set_index("model_key")
        for s in headline_ok_metrics(task):
            if s.label not in rows:
                continue
            ref = rows["model_key"].map(by_model[s.label]) if s.label in by_model else np.nan
            col = f"Δ {s.label}"
            rows[col] = np.where(rows["source"] == "reproduced", rows[s.label] - ref, np.nan)
            deltas.append((col, s.label))
    # ranked by the task's headline; a table without it by its first metric able to head one
    head = headline_metric(task).key if task in board_tasks() else None
    first = next((s for s in specs if s.key == head), None)
    first = first or next((s for s in specs if s.headline_ok), specs[0])
    # the reference rows (oracle ceiling, floor) first, then measured rows by that metric, then reported
    group = np.where(rows["kind"].isin(REFERENCE_KINDS), 0, np.where(rows["source"] == "reproduced", 1, 2))
    value = rows[first.label] if first.higher_is_better else -rows[first.label]
    order = pd.DataFrame({"g": group, "v": -value}).sort_values(["g", "v"], na_position="last",
                                                                 kind="stable").index
    rows = rows.loc[order].reset_index(drop=True)
    frames = {k: f.loc[order].reset_index(drop=True) for k, f in frames.items()}
    ranked = (rows["source"] == "reproduced") & ~rows["kind"].isin(UNRANKED_KINDS) & rows[first.label].notna()
    rk = ranks(rows[first.label].where(ranked).tolist(), frames["ci_low"][first.label].tolist(),
               frames["ci_high"][first.label].tolist(), first.higher_is_better,
               paired_winners(list(rows["model"]), verdicts, task, pkey) if first.key == head else None)
    rows["rank"] = [np.nan if r is None else float(r) for r in rk]
    measured = rows["source"] == "reproduced"
    ref = {k: rows.loc[measured & (rows["kind"] == k), first.label].dropna() for k in ("floor", "oracle")}
    both = len(ref["floor"]) and len(ref["oracle"])
    shares = [gap_closed(v, ref["floor"].iloc[0], ref["oracle"].iloc[0]) if both and m else None
              for v, m in zip(rows[first.label], measured)]
    rows["gap"] = [np.nan if x is None else x for x in shares]
    datasets = sorted(rows["dataset"].unique())
    notes = _standing_notes(rows, frames, specs, task, ranked & measured)
    if len(datasets) > 1:
        notes.append("rows come from different test sets (" + "; ".join(datasets)
                     + "): deltas compare a model with its reported number, not like for like")
    for s in nonfinite:
        bad = rows[rows[s.label].fillna(0) > 0]
        if len(bad):
            notes.append(f"{s.key}: non-finite prediction values in " + "; ".join(
                f"{r['model']} ({r[s.label]:g})" for _, r in bad.iterrows()))
    return GroupTable(task, pkey, rows, frames["std"], [(s.key, s.label, s.higher_is_better) for s in specs],
                      deltas, datasets, notes, frames["ci_low"], frames["ci_high"])


def _standing_notes(rows: pd.DataFrame, frames: dict, specs: list[MetricSpec], task: str,
                    ranked: pd.Series) -> list[str]:
    """Why a table's numbers look odd: small n, a column that is 0 for every ranked row, a [0, 0] interval."""
    notes = []
    small = [n for n, m in zip(rows["n"], rows["source"] == "reproduced") if m and is_small_n(n)]
    if small:
        notes.append(small_n_note(small))
    zeros, declared = [], []
    for s in specs:
        if is_nonfinite_count(s.key):
            continue
        col = rows.loc[ranked, s.label].dropna()
        if len(col) and (col == 0).all():
            zeros.append(s.label)
            declared.append(metric_note(task, s.key))
            continue
        zero = (frames["ci_low"][s.label] == 0) & (frames["ci_high"][s.label] == 0)
        if zero.any():
            notes.append(zero_interval_note(s.label, list(rows.loc[zero, "model"])))
    if zeros:
        notes.insert(int(bool(small)), all_zero_note(zeros, int(ranked.sum()), rows.loc[ranked, "n"],
                                                     " ".join(d for d in declared if d)))
    return notes


def paper_tables(reported: pd.DataFrame) -> list[GroupTable]:
    """One table per printed paper table and task (Table 2 has one per task), in the paper's order.

    Args:
        reported: the paper's numbers (``leaderboard.paper.load_paper_results(as_printed=True)``).

    Returns:
        Tables of reported rows only, each with ``paper_table`` set.
    """
    if reported is None or not len(reported):
        return []
    long = combine(pd.DataFrame(columns=LONG_COLUMNS), reported)
    out = []
    for name in MAPPED_TABLES:
        part = long[long["table"] == name]
        for task in [t for t in board_tasks() if t in set(part["task"])]:
            g = part[part["task"] == task]
            table = _wide(task, g["protocol_key"].iloc[0], g)
            table.paper_table = name
            out.append(table)
    return out
