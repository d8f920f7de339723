"""Wall-clock and CPU time of probe runs on the embedded synthetic data, stage by stage.

Usage:
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/speed/probe_speed.py --backbone sapiens2_0.1b --n 384
    .venv/bin/python benchmarks/speed/probe_speed.py --backbones main --json out.json   # the main job's list
    .venv/bin/python benchmarks/speed/probe_speed.py --backbone pixels --variant body --n 96

Prints, per backbone, the split, the protocol id, the seconds of each stage summed over the tasks
(``features_s``: targets, image stacking and the backbone pass, shared by the dense tasks;
``shortcut_fit_s``: the closed-form ridge fits; ``train_s``: the trained body, 0 for the linear
probe; ``eval_s``: evaluation and the bootstrap intervals), wall and CPU seconds (this process, all
threads), the headline metric per task, and the load average before and after: on a shared machine
the CPU time is the steadier number.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from benchmarks.mainjob import DEFAULT_BACKBONES, parse_weights
from benchmarks.probe.api import run_probe
from benchmarks.probe.protocol import body_protocol, default_protocol
from benchmarks.probe.records.headline import PROBE_HEADLINE
from benchmarks.results import start_measurement, write_measurement
from sapiens2.datasets.synth import ensure_default_split
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView
from sapiens2.tasks import task_names


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its threads so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default=None, help="one backbone (default sapiens2_0.1b)")
    ap.add_argument(
        "--backbones", default=None, help="comma-separated backbones, or 'main' for the main job's list"
    )
    ap.add_argument("--weights", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--n", type=int, default=384, help="images in the synthetic split (1 in 4 held out)")
    ap.add_argument("--size", default="256x192", help="HxW")
    ap.add_argument("--tasks", default=",".join(task_names()))
    ap.add_argument("--variant", choices=("default", "body"), default="default",
                    help="default: the linear probe; body: the trained pixel-shuffle body on every task")
    ap.add_argument("--iterations", type=int, default=None, help="override the protocol's iterations")
    ap.add_argument("--backbone-dtype", default=None, help="override the protocol's backbone_dtype")
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the measurements here")
    args = ap.parse_args(argv)

    import torch

    if args.backbones == "main":
        names = list(DEFAULT_BACKBONES)
    else:
        names = [b for b in (args.backbones or args.backbone or "sapiens2_0.1b").split(",") if b]
    weights = parse_weights(args.weights)
    h, w = (int(v) for v in args.size.lower().split("x"))
    protocol = (body_protocol() if args.variant == "body" else default_protocol()).replace(input_size=(h, w))
    if args.iterations:
        protocol = protocol.replace(iterations=args.iterations)
    if args.backbone_dtype:
        protocol = protocol.replace(backbone_dtype=args.backbone_dtype)
    load_start = _load()
    started = start_measurement()
    t0 = time.perf_counter()
    data = ensure_default_split("probe", args.n, (h, w), 0)
    t_data = time.perf_counter() - t0
    out = Path(args.out or tempfile.mkdtemp(prefix="probe_speed_"))
    runs = []
    for name in names:
        t0, c0 = time.perf_counter(), _cpu_s()
        paths = run_probe(name, args.tasks, data, out, seeds=(0,), protocol=protocol,
                          checkpoint=weights.get(name))
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
        stages: dict[str, float] = {}
        rows = []
        for p in paths:
            rec = RecordView.of(read_record(p))
            for k, v in rec.timings.items():
                stages[k] = round(stages.get(k, 0.0) + v, 1)
            spec = PROBE_HEADLINE[rec.task]
            iv = rec.interval(spec.key)
            rows.append({"task": rec.task, **{k: round(v, 1) for k, v in rec.timings.items()},
                         spec.key: rec.metric(spec.key), "interval": iv and [iv.lo, iv.hi],
                         "n": rec.intervals.n if rec.intervals else None})
        runs.append({"backbone": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                     "stages_s": stages, "tasks": rows})
        print(json.dumps(runs[-1]), flush=True)
    result = {
        "protocol_ids": protocol.protocol_ids(),
        "split": str(data),
        "n_images": args.n,
        "size": [h, w],
        "threads": torch.get_num_threads(),
        "data_s": round(t_data, 1),
        "total_wall_s": round(sum(r["wall_s"] for r in runs), 1),
        "total_cpu_s": round(sum(r["cpu_s"] for r in runs), 1),
        "load_before": load_start,
        "load_after": _load(),
        "runs": runs,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.json:
        write_measurement(args.json, "probe wall and CPU seconds per backbone and stage", result,
                          started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
