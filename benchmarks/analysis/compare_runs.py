"""Two main-job result folders side by side: every record's metrics and interval bounds, old -> new.

For each (backbone, task) present in both: the protocol ids, the largest relative difference over every
metric and bound, the headline old -> new, the chosen penalty, and whether the row stays at or above
the floor's headline (the floor of the same run). Written as JSON (and printed as a table).

Example:
    python -m benchmarks.analysis.compare_runs OLD/results NEW/results --out cmp.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from benchmarks.probe.records.headline import PROBE_HEADLINE
from sapiens2.records.view import RecordView


def _records(root: Path) -> dict:
    out = {}
    for p in sorted(root.glob("*/*/*/seed0.json")):
        rec = RecordView.of(json.loads(p.read_text()))
        out[(p.parts[-4], rec.task)] = rec
    return out


def _values(rec: RecordView) -> dict:
    vals = {f"metrics.{k}": v for k, v in rec.metrics.items() if isinstance(v, (int, float))}
    for k, (lo, hi) in rec.intervals.bounds.items():
        vals[f"bounds.{k}.lo"], vals[f"bounds.{k}.hi"] = lo, hi
    return vals


def _rel(a: float, b: float) -> float:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def compare(old_root: Path, new_root: Path) -> dict:
    """``{"rows": [...], "protocol_ids": {task: [old, new]}}`` of the records present in both folders."""
    old, new = _records(old_root), _records(new_root)
    rows, ids = [], {}
    for key in sorted(set(old) & set(new)):
        backbone, task = key
        a, b = _values(old[key]), _values(new[key])
        worst = max(((_rel(a[k], b[k]), k) for k in a.keys() & b.keys()), default=(0.0, ""))
        head = PROBE_HEADLINE[task]
        sign = 1 if head.higher_is_better else -1
        hnew = new[key].metric(head.key)
        floor = new.get(("floor", task))
        above = None if floor is None else sign * hnew >= sign * floor.metric(head.key) - 1e-12
        ids[task] = [old[key].protocol.id, new[key].protocol.id]
        rows.append({"backbone": backbone, "task": task, "headline": head.key,
                     "old": old[key].metric(head.key), "new": hnew,
                     "max_rel_diff": worst[0], "max_rel_diff_at": worst[1],
                     "keys_only_old": sorted(a.keys() - b.keys()),
                     "keys_only_new": sorted(b.keys() - a.keys()),
                     "alpha_old": old[key].config["shortcut"]["alpha"],
                     "alpha_new": new[key].config["shortcut"]["alpha"],
                     "at_or_above_floor": above})
    return {"rows": rows, "protocol_ids": ids, "only_old": sorted(map(list, set(old) - set(new))),
            "only_new": sorted(map(list, set(new) - set(old)))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    res = compare(args.old, args.new)
    for r in res["rows"]:
        print(f"{r['backbone']:28s} {r['task']:9s} {r['headline']:14s} {r['old']:.6g} -> {r['new']:.6g}  "
              f"max rel {r['max_rel_diff']:.2e} ({r['max_rel_diff_at']})  floor ok: {r['at_or_above_floor']}")
    if args.out:
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
