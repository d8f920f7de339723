"""Wall-clock of a probe run on the embedded synthetic data (all five tasks, default protocol).

Usage:
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/speed/probe_speed.py --backbone sapiens2_0.1b --n 64
    .venv/bin/python benchmarks/speed/probe_speed.py --backbone pixels --n 64 --json out.json

Prints the split, the protocol id, the time of the backbone pass (once per image, shared by the
dense tasks), decoder training and evaluation per task, the total, and the headline metric per task.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    from sapiens2.tasks import task_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="sapiens2_0.1b")
    ap.add_argument(
        "--n", type=int, default=64, help="images in the synthetic split (1 in 4 held out for test)"
    )
    ap.add_argument("--size", default="256x192", help="HxW")
    ap.add_argument("--tasks", default=",".join(task_names()))
    ap.add_argument("--iterations", type=int, default=None, help="override the protocol's iterations")
    ap.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the measurements here")
    args = ap.parse_args(argv)

    import torch

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.protocol import default_protocol
    from leaderboard.results import read_record
    from sapiens2.datasets.synth import ensure_default_split

    h, w = (int(v) for v in args.size.lower().split("x"))
    protocol = default_protocol().replace(input_size=(h, w))
    if args.iterations:
        protocol = protocol.replace(iterations=args.iterations)
    t0 = time.perf_counter()
    data = ensure_default_split("probe", args.n, (h, w), 0)
    t_data = time.perf_counter() - t0
    out = Path(args.out or tempfile.mkdtemp(prefix="probe_speed_"))
    t0 = time.perf_counter()
    paths = run_probe(args.backbone, args.tasks, data, out, seeds=(0,), protocol=protocol)
    total = time.perf_counter() - t0
    headline = {"pose": "AP", "seg": "mIoU", "normal": "normal_mae", "pointmap": "l2_mean", "albedo": "mae"}
    rows = []
    for p in paths:
        rec = read_record(p)
        rows.append(
            {
                "task": rec["task"],
                **{k: round(v, 2) for k, v in rec["timings"].items()},
                headline[rec["task"]]: rec["metrics"].get(headline[rec["task"]]),
            }
        )
    result = {
        "backbone": args.backbone,
        "params": read_record(paths[0])["model"]["params"],
        "protocol_id": protocol.protocol_id(),
        "split": str(data),
        "n_images": args.n,
        "size": [h, w],
        "threads": torch.get_num_threads(),
        "data_s": round(t_data, 1),
        "total_s": round(total, 1),
        "tasks": rows,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
