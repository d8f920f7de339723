"""Two main jobs run side by side (same machine, same time), code against code: CPU time and records.

The runs are the same job on two commits, started together so that both see the same machine load;
each was timed by ``/usr/bin/time -v``. Records are paired by backbone, task and seed file, whatever
their protocol id folder (an id may differ between the commits where a read-out changed). For the
tasks named by ``--changed`` (whose read-out the newer commit changes on purpose) the differing
leaves are listed, not counted as failures; every other pair must be equal leaf by leaf within
``--rel-tol`` (leaves naming when or how fast a record was made are skipped, as in
:mod:`benchmarks.analysis.records_equal`).

Example:
    python -m benchmarks.analysis.side_by_side OLD_RUN NEW_RUN --old-commit 74c2cd6 --new-commit 173fc8d \\
        --changed normal,pointmap,albedo --json benchmarks/results/probe/cpu_side_by_side.json
    (each RUN folder: ``out/results/...`` records and ``time.txt`` from ``/usr/bin/time -v -o``)
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from benchmarks.analysis.records_equal import compare_record, time_report
from benchmarks.results import start_measurement, write_measurement
from sapiens2.records.view import RecordView


def records_by_run_key(results: Path) -> dict[str, tuple[str, dict]]:
    """``{backbone/task/seedK.json: (protocol id, record)}`` of every record under ``results``."""
    out = {}
    for path in sorted(results.rglob("seed*.json")):
        rel = path.relative_to(results).parts  # backbone / protocol id / task / seedK.json
        if len(rel) != 4:
            raise ValueError(f"{path}: expected <backbone>/<protocol id>/<task>/seed<k>.json under {results}")
        key = f"{rel[0]}/{rel[2]}/{rel[3]}"
        if key in out:
            raise ValueError(f"{results}: two records for {key} ({out[key][0]} and {rel[1]})")
        out[key] = (rel[1], json.loads(path.read_text()))
    return out


def compare_runs(old_root: Path, new_root: Path, changed: set[str], rel_tol: float) -> dict:
    """Every record pair of two runs; the unchanged tasks' pairs must be equal."""
    old, new = records_by_run_key(old_root), records_by_run_key(new_root)
    out: dict = {"only_old": sorted(old.keys() - new.keys()), "only_new": sorted(new.keys() - old.keys()),
                 "equal": {}, "changed": {}}
    for key in sorted(old.keys() & new.keys()):
        task = key.split("/")[1]
        (pid_a, rec_a), (pid_b, rec_b) = old[key], new[key]
        cmp = compare_record(rec_a, rec_b, rel_tol)
        if task in changed:
            where = Counter(k.split(".")[0].split("[")[0] for k, _, _ in cmp["differs"])
            out["changed"][key] = {"protocol_ids": [pid_a, pid_b], "leaves": cmp["leaves"],
                                   "differing_leaves": len(cmp["differs"]), "differing_by_part": dict(where),
                                   "metrics": {k: [x, y] for k, x, y in cmp["differs"]
                                               if k.startswith("metrics.")}}
        else:
            out["equal"][key] = {"protocol_ids": [pid_a, pid_b], **cmp}
    out["all_equal"] = (not out["only_old"] and not out["only_new"]
                        and all(not r["differs"] and r["protocol_ids"][0] == r["protocol_ids"][1]
                                for r in out["equal"].values()))
    return out


def stage_seconds(root: Path) -> dict[str, float]:
    """The records' ``timings`` summed per stage (seconds, all records of a run)."""
    total: dict[str, float] = {}
    for _, rec in records_by_run_key(root).values():
        for k, v in RecordView.of(rec).timings.items():
            if isinstance(v, (int, float)):
                total[k] = round(total.get(k, 0.0) + v, 1)
    return total


def _cpu(t: dict) -> float:
    return round(t["user_s"] + t["system_s"], 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path,
                    help="run folders, old and new alternating (OLD_A NEW_A [OLD_B NEW_B ...])")
    ap.add_argument("--old-commit", required=True)
    ap.add_argument("--new-commit", required=True)
    ap.add_argument("--changed", default="", help="tasks whose read-out the new commit changes on purpose")
    ap.add_argument("--rel-tol", type=float, default=1e-9)
    ap.add_argument("--command-run", default="", help="the job's command line (for the file)")
    ap.add_argument("--notes", default="")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args(argv)
    if len(args.runs) % 2:
        ap.error("runs: give OLD NEW pairs")
    started = start_measurement()
    changed = {t for t in args.changed.split(",") if t}
    pairs = []
    for old, new in zip(args.runs[::2], args.runs[1::2]):
        t_old, t_new = time_report(old / "time.txt"), time_report(new / "time.txt")
        cmp = compare_runs(old / "out" / "results", new / "out" / "results", changed, args.rel_tol)
        pairs.append({
            "old_run": str(old), "new_run": str(new),
            "window_utc": {p: [(r / "start.txt").read_text().strip(), (r / "end.txt").read_text().strip()]
                           for p, r in (("old", old), ("new", new))},
            "load_at": {p: [(r / f"load_{w}.txt").read_text().strip() for w in ("start", "end")]
                        for p, r in (("old", old), ("new", new))},
            "time_old": t_old, "time_new": t_new,
            "cpu_s_old": _cpu(t_old), "cpu_s_new": _cpu(t_new),
            "cpu_ratio_new_over_old": round(_cpu(t_new) / _cpu(t_old), 4),
            "max_rss_mb_old": round(t_old["max_rss_kb"] / 1024, 1),
            "max_rss_mb_new": round(t_new["max_rss_kb"] / 1024, 1),
            "stage_s_old": stage_seconds(old / "out" / "results"),
            "stage_s_new": stage_seconds(new / "out" / "results"),
            "records": {"all_equal_outside_changed": cmp["all_equal"], "pairs_equal": len(cmp["equal"]),
                        "pairs_changed": len(cmp["changed"]),
                        "max_rel_diff_equal": max((r["max_rel_diff"] for r in cmp["equal"].values()),
                                                  default=0.0)},
            "comparison": cmp,
        })
    numbers = {"old_commit": args.old_commit, "new_commit": args.new_commit, "rel_tol": args.rel_tol,
               "changed_tasks": sorted(changed), "job": args.command_run, "pairs": pairs}
    write_measurement(args.json, f"the main job's probe side by side, {args.old_commit} (before the probe "
                      f"restructuring) against {args.new_commit}: CPU seconds, peak RSS, records key by key",
                      numbers, started=started, notes=args.notes)
    for p in pairs:
        print(json.dumps({k: v for k, v in p.items() if k not in ("comparison",)}, indent=1))
    return 0 if all(p["records"]["all_equal_outside_changed"] for p in pairs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
