"""Probe several backbones and print each one's headline beside the feature-free floor.

Every cell is ``value [low, high] n=N`` (the record's 95% bootstrap interval), then the paired
difference to the ``floor`` row (:mod:`benchmarks.probe.records.compare`, same test images) with a flag when a
row is worse than the floor beyond that interval, then the read-out's penalty and held-out R^2 (of
what the per-pixel prior leaves).

Example:
    python -m benchmarks.analysis.probe_floor_table --data DIR --out /tmp/v5 \\
        --backbones floor,gt-oracle,pixels,sapiens2_cpu_small,sapiens2_cpu_small-random
"""

from __future__ import annotations

import argparse
import json

from benchmarks.probe.api import RunOptions, run_probe
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.records.compare import compare_records
from benchmarks.probe.records.headline import PROBE_HEADLINE, format_interval
from benchmarks.results import start_measurement, write_measurement
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView


def _bounds(rec: RecordView, key: str):
    iv = rec.interval(key)
    return None if iv is None else (iv.lo, iv.hi)


def _cell(rec: RecordView) -> str:
    spec = PROBE_HEADLINE[rec.task]
    return format_interval(spec, rec.metric(spec.key), _bounds(rec, spec.key),
                           rec.intervals.n if rec.intervals else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backbones", default="floor,gt-oracle,pixels")
    ap.add_argument("--tasks", default="pose,seg,normal,pointmap,albedo")
    ap.add_argument("--protocol", default=None, help="JSON file of protocol overrides")
    ap.add_argument("--json", default=None, help="write the table's data here")
    ap.add_argument("--feature-cache", default=None, help="on-disk feature cache (reruns skip the backbone)")
    args = ap.parse_args(argv)

    started = start_measurement()
    protocol = default_protocol()
    if args.protocol:
        with open(args.protocol) as f:
            protocol = protocol.replace(**json.load(f))
    names = [b.strip() for b in args.backbones.split(",") if b.strip()]
    if "floor" not in names:
        names.insert(0, "floor")
    recs: dict[tuple[str, str], RecordView] = {}
    for name in names:
        for path in run_probe(name, args.tasks, args.data, args.out, seeds=(0,), protocol=protocol,
                              options=RunOptions(cache_dir=args.feature_cache)):
            # the path tells the paired comparison where the bootstrap side file is
            rec = RecordView(read_record(path), path=str(path))
            recs[(name, rec.task)] = rec
    rows = []
    for task in args.tasks.split(","):
        floor = recs[("floor", task)]
        print(f"\n{task} ({PROBE_HEADLINE[task].label}; protocol {floor.protocol.id})")
        for name in names:
            rec = recs[(name, task)]
            sc = rec.config.get("shortcut") or {}
            diff = ""
            key = PROBE_HEADLINE[task].key
            row = {"task": task, "backbone": name, "value": rec.metric(key), "bounds": _bounds(rec, key),
                   "n": rec.intervals.n if rec.intervals else None,
                   "alpha": sc.get("alpha"), "heldout_r2": sc.get("heldout_r2")}
            if name != "floor":
                c = compare_records(rec, floor)
                below = c["winner"] == "b"
                diff = f"vs floor {c['display']['difference']} [{c['low']:.4g}, {c['high']:.4g}]"
                diff += "  BELOW THE FLOOR" if below else ""
                row.update(diff=c["difference"], diff_low=c["low"], diff_high=c["high"], below_floor=below)
            r2 = sc.get("heldout_r2")
            print(f"  {name:28s} {_cell(rec):34s} {diff:44s} alpha={sc.get('alpha')} "
                  f"R2={'-' if r2 is None else f'{r2:.3f}'}")
            rows.append(row)
    if args.json:
        write_measurement(args.json, "probe headline of each backbone against the floor (paired)", rows,
                          started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
