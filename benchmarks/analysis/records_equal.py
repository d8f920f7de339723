"""Two runs of the same job, code against code: every record key by key, and the CPU time of each run.

Every numeric leaf of every record (metrics, intervals, config, ...) is compared within a relative
tolerance; leaves that name when or how fast the run went (``timings``, dates, the provenance, the
record hash) are left out, and every other leaf must be equal. The CPU seconds come from each run's
``/usr/bin/time -v`` report. The result is written as a measurement file.

Example:
    python -m benchmarks.analysis.records_equal OLD_OUT NEW_OUT --time-old old.log --time-new new.log \\
        --json benchmarks/results/probe/refactor_records_equal.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from benchmarks.results import start_measurement, write_measurement

# leaves that say when, where or how fast a record was made, not what it measured
_SKIPPED = re.compile(r"(^|\.)(timings|created_utc|run_id|provenance|record_hash)(\.|$)")
_TIME_FIELDS = {
    "User time (seconds)": "user_s", "System time (seconds)": "system_s",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall", "Maximum resident set size (kbytes)": "max_rss_kb",
}


def _leaves(value, prefix: str = ""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def _records(root: Path) -> dict[str, dict]:
    paths = sorted(root.rglob("seed*.json"))
    return {p.relative_to(root).as_posix(): json.loads(p.read_text()) for p in paths}


def compare_record(old: dict, new: dict, rel_tol: float) -> dict:
    """One record pair: leaves compared, the largest relative difference and every leaf that differs
    (``[key, old, new]``); the leaves :data:`_SKIPPED` names are left out."""
    a = {k: v for k, v in _leaves(old) if not _SKIPPED.search(k)}
    b = {k: v for k, v in _leaves(new) if not _SKIPPED.search(k)}
    worst, differs = 0.0, []
    for k in sorted(a.keys() | b.keys()):
        x, y = a.get(k, "<absent>"), b.get(k, "<absent>")
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
            same_nan = isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
            rel = 0.0 if x == y or same_nan else abs(x - y) / max(abs(x), abs(y), 1e-300)
            worst = max(worst, rel)
            if rel > rel_tol:
                differs.append([k, x, y])
        elif x != y:
            differs.append([k, x, y])
    return {"leaves": len(a), "max_rel_diff": worst, "differs": differs}


def compare_records(old_root: Path, new_root: Path, rel_tol: float) -> dict:
    """Per record path: leaves compared, the largest relative difference, and every leaf that differs."""
    old, new = _records(old_root), _records(new_root)
    out = {"only_old": sorted(old.keys() - new.keys()), "only_new": sorted(new.keys() - old.keys()),
           "records": {path: compare_record(old[path], new[path], rel_tol)
                       for path in sorted(old.keys() & new.keys())}}
    out["all_equal"] = not out["only_old"] and not out["only_new"] and all(
        not r["differs"] for r in out["records"].values())
    return out


def time_report(path: Path) -> dict:
    """The CPU and wall time and peak memory of a ``/usr/bin/time -v`` report."""
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        key, _, value = line.strip().rpartition(": ")
        if key in _TIME_FIELDS:
            found[_TIME_FIELDS[key]] = value if key.startswith("Elapsed") else float(value)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--time-old", type=Path, required=True)
    ap.add_argument("--time-new", type=Path, required=True)
    ap.add_argument("--rel-tol", type=float, default=1e-9)
    ap.add_argument("--name", default="the same job on two commits: records key by key and CPU time")
    ap.add_argument("--notes", default="")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args(argv)
    started = start_measurement()
    cmp = compare_records(args.old, args.new, args.rel_tol)
    numbers = {"rel_tol": args.rel_tol, "all_equal": cmp["all_equal"], "records": len(cmp["records"]),
               "max_rel_diff": max((r["max_rel_diff"] for r in cmp["records"].values()), default=0.0),
               "time_old": time_report(args.time_old), "time_new": time_report(args.time_new),
               "comparison": cmp}
    write_measurement(args.json, args.name, numbers, started=started, notes=args.notes)
    print(json.dumps({k: v for k, v in numbers.items() if k != "comparison"}, indent=1))
    return 0 if cmp["all_equal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
