"""Memory and speed of the streaming dense evaluators over 10,000 samples.

For each evaluator, feeds ``--n`` synthetic samples (``--size`` HxW, batches of ``--batch``) keyed by
dataset index and prints, at checkpoints, the process RSS, the evaluator's own footprint (state
tensors + per-sample tail rows + the seen-index bitmap) and the throughput. The state is fixed-size;
only the seen-index bitmap grows, by one byte per dataset index.

Usage:
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/speed/dense_metrics_memory.py [--n 10000] [--size 32x24]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.results import start_measurement, write_measurement
from evaluators import build_evaluator  # noqa: E402
from sapiens2.tasks import task_names  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def footprint_mb(ev) -> float:
    n = sum(t.numel() * t.element_size() for t in ev._state.values())
    n += sum(t.numel() * t.element_size() for t in ev._tail.values())
    n += ev._seen.numel() + ev._tail_idx.numel() * 8
    return n / 2**20


def make_batch(task: str, b: int, h: int, w: int, g: torch.Generator):
    mask = torch.rand(b, h, w, generator=g) > 0.2
    if task == "seg":
        return torch.randn(b, 29, h // 2, w // 2, generator=g), torch.randint(0, 29, (b, h, w), generator=g)
    gt = torch.rand(b, 3, h, w, generator=g)
    if task == "pointmap":
        gt = gt + 2.0
    return gt[:, :, ::2, ::2] + 0.1 * torch.randn(b, 3, h // 2, w // 2, generator=g), gt, mask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", default="32x24", help="GT size HxW")
    ap.add_argument("--tasks", default=",".join(task_names(dense=True)))
    ap.add_argument("--json", default=None, help="write the numbers here (a measurement file)")
    args = ap.parse_args()

    started = start_measurement()
    rows = []
    h, w = (int(v) for v in args.size.split("x"))
    checkpoints = {int(args.n * f) for f in (0.1, 0.25, 0.5, 1.0)}
    print(f"{args.n} samples of {h}x{w}, batch {args.batch}, torch threads {torch.get_num_threads()}")
    print(f"{'task':<9} {'samples':>8} {'rss_MB':>8} {'evaluator_MB':>13} {'samples/s':>10}")
    for task in args.tasks.split(","):
        ev = build_evaluator(task)
        g = torch.Generator().manual_seed(0)
        batch = make_batch(task, args.batch, h, w, g)  # reuse one batch: we measure the evaluator, not data
        done, t0 = 0, time.perf_counter()
        while done < args.n:
            b = min(args.batch, args.n - done)
            ev.update(*[x[:b] for x in batch], index=range(done, done + b))
            done += b
            if any(done >= c > done - b for c in checkpoints):
                rate = done / (time.perf_counter() - t0)
                row = {"task": task, "samples": done, "rss_mb": rss_mb(), "evaluator_mb": footprint_mb(ev),
                       "samples_per_s": rate}
                rows.append(row)
                print(f"{task:<9} {done:>8} {row['rss_mb']:>8.1f} {row['evaluator_mb']:>13.3f} {rate:>10.0f}")
        r = ev.compute()
        assert r["num_samples"] == args.n, r["num_samples"]
    if args.json:
        write_measurement(args.json, "dense evaluators' memory and rate against the number of samples",
                          {"size": [h, w], "batch": args.batch, "rows": rows}, started=started)


if __name__ == "__main__":
    main()
