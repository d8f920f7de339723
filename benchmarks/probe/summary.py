"""The terminal table of probe records: one row per (backbone, protocol), the probe's headline metric
of every task with its 95% interval and the number of test images.

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


def summary_table(records: list[Record], tasks) -> str:
    """Rows of backbones x the probe headline of each of ``tasks``: ``value [low, high] n=N``.

    A cell without an interval shows the value alone; a missing record shows ``-``.
    """
    picked = _pick(records)
    rows = list(dict.fromkeys((m, p) for m, p, _ in picked))
    header = ["backbone", "protocol"] + [f"{t} {PROBE_HEADLINE[t].label} [95% CI]" for t in tasks]
    table = [header]
    for model, pid in rows:
        cells = [model, pid]
        for t in tasks:
            rec = picked.get((model, pid, t))
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
