"""Seconds per pretraining step (forward, losses, backward, AdamW, EMA) of named configs, side by side.

Configs: ``tiny`` (the ``smoke_tiny`` recipe: 64-wide 4-block Sapiens2, patch 8, 32x24 crops),
``cpu_small``, ``cpu_small_mae`` and ``cpu_small_cl`` (the shipped CPU recipe and its ablations) and
``0.1b`` (``sapiens2_0.1b`` at 256x192 with the paper's objective: 8x512 MAE decoder, 65536
prototypes, 2 global 256x192 + 4 local 112x80 crops). Every config runs ``--warmup`` untimed and
``--iters`` timed steps (the step time excludes data loading and checkpoint writes, which are
reported apart) on random-texture images written to a temporary folder.

Example:
    OMP_NUM_THREADS=2 python benchmarks/speed/pretrain_step.py --configs tiny,0.1b --batch 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.results import start_measurement, write_measurement
from sapiens2.pretrain.recipes import get_recipe, resolve_config
from sapiens2.pretrain.trainer import pretrain


def config(name: str, batch: int, steps: int, precision: str) -> dict:
    """The config of a named speed case."""
    if name == "tiny":
        cfg = get_recipe("smoke_tiny")
    elif name in ("cpu_small", "cpu_small_mae", "cpu_small_cl"):
        cfg = get_recipe(name)
    elif name == "0.1b":
        cfg = {"name": "speed_0.1b", "model": {"backbone": {"type": "Sapiens2", "arch": "sapiens2_0.1b",
                                                            "img_size": [256, 192]}}}
    else:
        raise ValueError(f"unknown speed config {name!r}; "
                         "known: tiny, cpu_small, cpu_small_mae, cpu_small_cl, 0.1b")
    cfg.update(steps=steps, batch_size=batch, precision=precision)
    cfg["run"] = {"checkpoint_every": 10**9, "log_every": 1, "num_workers": 0}
    return resolve_config(cfg)


def write_images(folder: Path, n: int, size: tuple[int, int], seed: int = 0) -> Path:
    """Random smooth-noise RGB images."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        small = rng.random((size[0] // 8, size[1] // 8, 3))
        img = np.kron(small, np.ones((8, 8, 1)))
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i:04d}.png")
    return folder


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="tiny,0.1b")
    p.add_argument("--batch", type=int, default=2, help="images per step (each gives 2 global + local views)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)

    started = start_measurement()
    if args.threads:
        torch.set_num_threads(args.threads)

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs.split(","):
            cfg = config(name, args.batch, args.warmup + args.iters, args.precision)
            size = tuple(cfg["crops"]["global_size"])
            data = write_images(Path(tmp) / f"data_{name}", 8, (size[0] * 5 // 4, size[1] * 5 // 4))
            t0 = time.perf_counter()
            res = pretrain(cfg, data, Path(tmp) / f"out_{name}", device=args.device, progress=False)
            wall = time.perf_counter() - t0
            steps = [r["seconds"] for r in res.records[args.warmup:]]
            row = {"config": name, "batch": args.batch, "precision": args.precision,
                   "threads": torch.get_num_threads(), "step_s_median": statistics.median(steps),
                   "step_s_all": [round(s, 3) for s in steps], "wall_s_incl_build_and_export": round(wall, 1),
                   "images_per_s": args.batch / statistics.median(steps)}
            results.append(row)
            print(json.dumps(row))
    if args.json:
        write_measurement(args.json, "seconds per pretraining step of named configs", results,
                          started=started)


if __name__ == "__main__":
    main()
