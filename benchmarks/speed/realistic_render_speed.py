"""Seconds per image of the realistic generator, by stage, on one process with one render thread.

Stages per scene: anny people (sampling, posing, clothing), the ground-truth (AOV) pass, the
``fast`` image (shaded from that pass), and ``path`` images at the given sample counts. Wall and
CPU seconds are both reported (one render thread: they should agree unless the machine is busy).
The output file starts with the command, commit, machine, date and load.

Usage:
    .venv/bin/python benchmarks/speed/realistic_render_speed.py [--scenes 3] [--sizes 256x192 512x384]
        [--spp 16 64] [--out benchmarks/results/realistic_render_speed.txt]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people
from sapiens2.datasets.synth.realistic.render import project_keypoints, render_ground_truth, render_image
from sapiens2.datasets.synth.realistic.sample import prepare
from sapiens2.datasets.synth.realistic.scene import compose_scene
from sapiens2.datasets.synth.realistic.variant import load_mitsuba


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _header(args) -> list[str]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = platform.processor() or "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return [f"# command: {' '.join([sys.executable, *sys.argv])}",
            f"# commit: {commit}", f"# machine: {cpu}, {os.cpu_count()} cores, {platform.platform()}",
            f"# date: {datetime.now(timezone.utc).isoformat(timespec='seconds')}",
            f"# load average at start: {os.getloadavg()}", f"# scenes per size: {args.scenes}"]


def main() -> None:
    """Measure and write the table."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--scenes", type=int, default=3)
    p.add_argument("--sizes", nargs="+", default=["256x192", "512x384"])
    p.add_argument("--spp", type=int, nargs="+", default=[16, 64])
    p.add_argument("--out", default="benchmarks/results/realistic_render_speed.txt")
    args = p.parse_args()

    lines = _header(args)
    lines.append(f"# mitsuba variant: {prepare(progress=False)}, 1 render thread, 2 people per scene")
    mi = load_mitsuba(threads=1)
    stages = ["people", "ground_truth", "fast_image"] + [f"path_{s}spp_image" for s in args.spp]
    lines.append(f"{'size':>9s} {'stage':>18s} {'wall_s/img':>11s} {'cpu_s/img':>10s}")
    for size in args.sizes:
        hw = tuple(int(x) for x in size.split("x"))
        times = {s: [] for s in stages}
        for k in range(args.scenes):
            rng = np.random.default_rng(1000 + k)
            people, w, c = _timed(lambda rng=rng: sample_people(rng, 2, PeopleSettings()))
            times["people"].append((w, c))
            scene = compose_scene(rng, hw, people)
            gt, w, c = _timed(lambda scene=scene: render_ground_truth(scene, mi))
            _, w2, c2 = _timed(lambda scene=scene, gt=gt: project_keypoints(scene, gt))
            times["ground_truth"].append((w + w2, c + c2))
            _, w, c = _timed(lambda scene=scene, gt=gt, k=k: render_image(scene, mi, "fast", 0, k, gt))
            times["fast_image"].append((w, c))
            for spp in args.spp:
                _, w, c = _timed(lambda scene=scene, spp=spp, k=k: render_image(scene, mi, "path", spp, k))
                times[f"path_{spp}spp_image"].append((w, c))
        for stage in stages:
            arr = np.array(times[stage])
            lines.append(f"{size:>9s} {stage:>18s} {arr[:, 0].mean():11.2f} {arr[:, 1].mean():10.2f}")
            print(lines[-1], flush=True)
    lines.append(f"# load average at end: {os.getloadavg()}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
