"""The terminal table of probe records: one row per backbone (and protocol), the probe's headline
metric of every task with its 95% interval and the number of test images.

Each task has its own protocol id, so a row holds one record per task and its protocol column
lists the row's ids (their hashes, in the tasks' order, when they differ); a backbone probed under
several protocols of a task gets a row per protocol.

Example:
    >>> rec = {"model": {"name": "pixels"}, "task": "seg", "seeds": [0], "metrics": {"mIoU": 4.4},
    ...        "protocol": {"kind": "probe", "protocol_id": "probe-v4-abc"},
    ...        "intervals": {"n": 96, "bounds": {"mIoU": [4.1, 4.7]}}}
    >>> print(summary_table([rec], tasks=["seg"]))
    backbone  protocol      seg mIoU % [95% CI]
    pixels    probe-v4-abc  4.40 [4.10, 4.70] n=96
"""

from __future__ import annotations

from benchmarks.probe.headline import PROBE_HEADLINE, format_interval
from sapiens2.records.view import Record, RecordView, record_views


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


def _rows(picked: dict, tasks) -> list[tuple[str, dict[str, str]]]:
    """``(backbone, {task: protocol id})`` per row: the k-th protocol of each task of a backbone."""
    ids: dict[str, dict[str, list[str]]] = {}
    for model, pid, task in picked:
        if task in tasks:
            ids.setdefault(model, {}).setdefault(task, []).append(pid)
    return [(model, {t: v[k] for t, v in per_task.items() if k < len(v)})
            for model, per_task in ids.items() for k in range(max(map(len, per_task.values())))]


def _protocol_label(ids: list[str]) -> str:
    """One id as it is; several: their shared ``probe-v<N>`` and the hashes joined by ``/``."""
    distinct = list(dict.fromkeys(ids))
    if len(distinct) == 1:
        return distinct[0]
    prefixes = {i.rsplit("-", 1)[0] for i in distinct}
    if len(prefixes) == 1:
        return f"{prefixes.pop()} " + "/".join(i.rsplit("-", 1)[-1] for i in ids)
    return "/".join(ids)


def summary_table(records: list[Record], tasks) -> str:
    """Rows of backbones x the probe headline of each of ``tasks``: ``value [low, high] n=N``.

    A cell without an interval shows the value alone; a missing record shows ``-``.
    """
    picked = _pick(records)
    header = ["backbone", "protocol"] + [f"{t} {PROBE_HEADLINE[t].label} [95% CI]" for t in tasks]
    table = [header]
    for model, pids in _rows(picked, tasks):
        cells = [model, _protocol_label([pids[t] for t in tasks if t in pids])]
        for t in tasks:
            rec = picked.get((model, pids[t], t)) if t in pids else None
            if rec is None:
                cells.append("-")
                continue
            spec = PROBE_HEADLINE[t]
            iv = rec.interval(spec.key)
            n = rec.intervals.n if rec.intervals else None
            cells.append(format_interval(spec, rec.metric(spec.key), iv and (iv.lo, iv.hi), n))
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)
