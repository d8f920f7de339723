"""The terminal table of probe records: one row per backbone (and protocol), the probe's headline
metric of every task with its 95% interval, and the share of the floor-to-oracle gap the row closes.

The ceiling (``gt-oracle``) is always the first row and the floor the second, whatever the run's
order; the measured backbones follow in the order they were probed. The number of test images is
said once per task under the table (per cell where rows differ), with a flag below 30, and so are
the headline metrics' units (pose EPE: pixels of the 1024x768 crop).

Each task has its own protocol id, so a row holds one record per task; the ids are listed under the
table, or in a protocol column when a backbone was probed under several protocols of a task (it gets
a row per protocol).

Example:
    >>> def rec(name, value, backbone=None):
    ...     return {"model": {"name": name, "backbone": backbone}, "task": "seg", "seeds": [0],
    ...             "metrics": {"mIoU": value}, "protocol": {"kind": "probe", "protocol_id": "probe-v4-abc"},
    ...             "intervals": {"n": 96, "bounds": {"mIoU": [value - 0.3, value + 0.3]}}}
    >>> recs = [rec("pixels", 4.4), rec("gt-oracle", 60.0, "GroundTruthOracle"), rec("floor", 4.0)]
    >>> print(summary_table(recs, tasks=["seg"]))
    backbone             seg mIoU % ↑       gap
    gt-oracle (ceiling)  60.0 [59.7, 60.3]  100%
    floor                4.00 [3.70, 4.30]  0%
    pixels               4.40 [4.10, 4.70]  0.71%
    each cell: value [95% interval]
    n (test images): seg 96
    protocol ids: seg probe-v4-abc
    gap: the share of the floor-to-ceiling gap closed, 0% at the floor, 100% at the ceiling
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from benchmarks.probe.records.headline import PROBE_HEADLINE, Headline, format_interval
from leaderboard.catalog import metric_note
from leaderboard.rowinfo import row_kind
from leaderboard.standing import SMALL_N, gap_closed, gap_text, is_small_n
from sapiens2.records.view import Record, RecordView, record_views

_PLACE = {"oracle": 0, "floor": 1}


def _pick(records: list[Record]) -> dict[tuple[str, str, str], RecordView]:
    """One record per (backbone, protocol id, task): the mean over seeds when there is one."""
    out: dict[tuple[str, str, str], RecordView] = {}
    for r in record_views(records):
        if r.protocol.kind != "probe":
            continue
        key = (r.model.name, r.protocol.id, r.task)
        if key not in out or len(r.seeds) > len(out[key].seeds):
            out[key] = r
    return out


def _rows(picked: dict, tasks: Sequence[str]) -> list[tuple[str, dict[str, str]]]:
    """``(backbone, {task: protocol id})`` per row: the k-th protocol of each task of a backbone; the
    ceiling first, the floor second, the others in the order they came."""
    ids: dict[str, dict[str, list[str]]] = {}
    kinds: dict[str, str] = {}
    for (model, pid, task), rec in picked.items():
        if task in tasks:
            ids.setdefault(model, {}).setdefault(task, []).append(pid)
            kinds[model] = row_kind(rec.model.as_dict(), dict(rec.config))
    order = sorted(ids, key=lambda m: _PLACE.get(kinds[m], 2))  # stable: the run's order otherwise
    return [(model, {t: v[k] for t, v in ids[model].items() if k < len(v)})
            for model in order for k in range(max(map(len, ids[model].values())))]


def _protocol_label(ids: list[str]) -> str:
    """One id as it is; several: their shared ``probe-v<N>`` and the hashes joined by ``/``."""
    distinct = list(dict.fromkeys(ids))
    if len(distinct) == 1:
        return distinct[0]
    prefixes = {i.rsplit("-", 1)[0] for i in distinct}
    if len(prefixes) == 1:
        return f"{prefixes.pop()} " + "/".join(i.rsplit("-", 1)[-1] for i in ids)
    return "/".join(ids)


def _kind(rec: RecordView) -> str:
    return row_kind(rec.model.as_dict(), dict(rec.config))


def summary_table(records: list[Record], tasks: Sequence[str]) -> str:
    """Rows of backbones x the probe headline of each of ``tasks``: ``value [low, high]`` and the gap closed.

    A cell without an interval shows the value alone; a missing record shows ``-``. The gap column of a
    task is there when the floor and the ceiling were probed on it under the row's protocol.
    """
    picked = _pick(records)
    rows = _rows(picked, tasks)
    refs = {(_kind(r), r.protocol.id, r.task): r for r in picked.values() if _kind(r) in _PLACE}
    per_task_ids = {t: {pids[t] for _, pids in rows if t in pids} for t in tasks}
    several = any(len(v) > 1 for v in per_task_ids.values())
    gap_tasks = [t for t in tasks if any(("floor", p, t) in refs and ("oracle", p, t) in refs
                                         for p in per_task_ids[t])]
    header = ["backbone"] + (["protocol"] if several else [])
    for t in tasks:
        spec = PROBE_HEADLINE[t]
        header.append(f"{t} {spec.label} {'↑' if spec.higher_is_better else '↓'}")
        if t in gap_tasks:
            header.append("gap")
    table = [header]
    ns: dict[str, set[int]] = {t: set() for t in tasks}
    for model, pids in rows:
        first = next(picked[(model, pids[t], t)] for t in tasks if t in pids)
        kind = _kind(first)
        cells = [model + (" (ceiling)" if kind == "oracle" else "")]
        if several:
            cells.append(_protocol_label([pids[t] for t in tasks if t in pids]))
        for t in tasks:
            rec = picked.get((model, pids[t], t)) if t in pids else None
            cells += _task_cells(t, rec, refs, pids.get(t), t in gap_tasks, ns)
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines + _footer(tasks, ns, per_task_ids, several, gap_tasks))


def _task_cells(task: str, rec: RecordView | None, refs: dict, pid: str | None, with_gap: bool,
                ns: dict[str, set[int]]) -> list[str]:
    """The value cell (and the gap cell) of one task of one row; the record's n goes into ``ns``."""
    if rec is None:
        return ["-"] + (["-"] if with_gap else [])
    spec = PROBE_HEADLINE[task]
    iv = rec.interval(spec.key)
    n = rec.intervals.n if rec.intervals else None
    if n is not None:
        ns[task].add(int(n))
    value = rec.metric(spec.key)
    cells = [_value_text(spec, value, iv and (iv.lo, iv.hi))]
    if with_gap:
        floor, oracle = refs.get(("floor", pid, task)), refs.get(("oracle", pid, task))
        share = None if floor is None or oracle is None else gap_closed(
            value, floor.metric(spec.key), oracle.metric(spec.key))
        cells.append(gap_text(share))
    return cells


def _value_text(spec: Headline, value: float | None, bounds: Sequence[float] | None) -> str:
    """``value [low, high]``; a near-zero value (the ceiling's error) in two significant digits."""
    if value is None or not 0 < abs(value * spec.scale) < 1e-3:
        return format_interval(spec, value, bounds)
    text = f"{value * spec.scale:.2g}"
    return text + (f" [{bounds[0] * spec.scale:.2g}, {bounds[1] * spec.scale:.2g}]" if bounds else "")


def _footer(tasks: Sequence[str], ns: dict[str, set[int]], ids: dict[str, set[str]], several: bool,
            gap_tasks: Collection[str]) -> list[str]:
    """The lines under the table: n per task (flagged when small), protocol ids, units and the gap."""
    out = ["each cell: value [95% interval]"]
    counts = [f"{t} {'/'.join(map(str, sorted(ns[t])))}" for t in tasks if ns[t]]
    if counts:
        out.append("n (test images): " + ", ".join(counts))
    small = sorted({n for t in tasks for n in ns[t] if is_small_n(n)})
    if small:
        out.append(f"SMALL n ({', '.join(map(str, small))} < {SMALL_N} test images): intervals are rough and "
                   "no ranking should be read off these rows; probe a larger split")
    if not several:
        out.append("protocol ids: " + ", ".join(f"{t} {next(iter(ids[t]))}" for t in tasks if ids[t]))
    notes = [metric_note(t, PROBE_HEADLINE[t].key) for t in tasks]
    out += [f"units: {note}" for note in dict.fromkeys(n for n in notes if n)]
    if gap_tasks:
        out.append("gap: the share of the floor-to-ceiling gap closed, 0% at the floor, 100% at the ceiling")
    return out
