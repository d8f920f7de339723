"""Images per minute of the synthetic renderer (render only, and render + write a full split).

Usage:
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/speed/synth_speed.py [--n 60] [--workers 1 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.results import start_measurement, write_measurement
from sapiens2.datasets.synth import generate_split, synth_sample


def _render_rate(n: int, hw: tuple[int, int]) -> float:
    t = time.perf_counter()
    for i in range(n):
        synth_sample(0, i, hw)
    return 60.0 * n / (time.perf_counter() - t)


def _split_rate(n: int, hw: tuple[int, int], workers: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        generate_split(Path(tmp) / "s", n=n, seed=0, size=hw, workers=workers, progress=False)
        return 60.0 * n / (time.perf_counter() - t)


def main() -> None:
    """Measure and print the rates."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--n", type=int, default=60, help="images per 256x192 measurement")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--n-large", type=int, default=4, help="images at 1024x768")
    p.add_argument("--json", default=None, help="write the numbers here")
    args = p.parse_args()
    started = start_measurement()
    rows = {"render_256x192_1proc": _render_rate(args.n, (256, 192))}
    for w in args.workers:
        rows[f"split_256x192_{w}proc"] = _split_rate(args.n, (256, 192), w)
    rows["render_1024x768_1proc"] = _render_rate(args.n_large, (1024, 768))
    for k, v in rows.items():
        print(f"{k:28s} {v:8.0f} images/min")
    if args.json:
        write_measurement(args.json, "synthetic rendering rate (images per minute)",
                          {"images_per_minute": rows, "n": args.n}, started=started)


if __name__ == "__main__":
    main()
