"""Cost of ``bootstrap_intervals`` (1000 resamples) per evaluator, on ``--images`` test images.

The bootstrap works on per-image statistics, so its cost depends on the number of images and the
size of each image's row (seg: a 29 x 30 confusion matrix; normal: a 360-bin histogram; pose: the
per-image matches of 308 keypoints), not on the image resolution: the dense evaluators are fed
small random 32 x 24 maps. Pose uses one synthetic person per image with noisy predictions.
Prints, per task, the keys resampled, the median wall time of ``--repeats`` calls (after one warm-up
call), and the time of ``compute()`` beside it.

Usage:
    PYTHONPATH=. .venv/bin/python benchmarks/speed/bootstrap_speed.py [--images 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np
import torch

from benchmarks.results import start_measurement, write_measurement
from evaluators.pose.evaluator import PoseEvaluator
from evaluators.registry import build_evaluator

KEYS = {
    "seg": ["mIoU", "mAcc", "aAcc"],
    "normal": ["normal_mae", "normal_median_deg"],
    "pointmap": ["l2_mean", "scale_aligned.l2_mean"],
    "albedo": ["mae", "psnr"],
    "pose": ["AP", "body/AP", "PCK@0.05", "PCK@0.1", "EPE"],
}


def dense_evaluator(task: str, n: int):
    g = torch.Generator().manual_seed(0)
    ev = build_evaluator(task)
    h, w = 32, 24
    for start in range(0, n, 16):
        b = min(16, n - start)
        idx = list(range(start, start + b))
        mask = torch.rand(b, h, w, generator=g) > 0.2
        if task == "seg":
            gt = torch.randint(0, 29, (b, h, w), generator=g)
            ev.update(torch.randn(b, 29, h, w, generator=g) + 3 * torch.nn.functional.one_hot(gt, 29)
                      .permute(0, 3, 1, 2), gt, index=idx)
            continue
        gt = torch.rand(b, 3, h, w, generator=g) + (1.0 if task == "pointmap" else 0.0)
        ev.update(gt + 0.1 * torch.randn(b, 3, h, w, generator=g), gt, mask, index=idx)
    return ev


def pose_evaluator(n: int):
    rng = np.random.default_rng(0)
    k = 308
    ev = PoseEvaluator(meta="keypoints308")
    gt = rng.uniform(20, 170, (n, k, 2)) * np.array([1.0, 1.3])
    vis = (rng.random((n, k)) > 0.1) * 2.0
    lo, hi = gt.min(1), gt.max(1)
    boxes = np.concatenate([lo, hi - lo], 1)
    pred = gt + rng.normal(0, 1, gt.shape) * rng.uniform(0.5, 6, (n, 1, 1))
    ev.update(pred, np.ones((n, k)), list(range(n)), index=list(range(n)),
              gt_keypoints=np.concatenate([gt, vis[..., None]], 2), gt_bboxes=boxes,
              gt_areas=boxes[:, 2] * boxes[:, 3] * 0.6)
    return ev


def timed(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=200, help="test images per task (default 200)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per task (default 3)")
    p.add_argument("--json", default=None, help="write the timings here (a measurement file)")
    args = p.parse_args(argv)

    started = start_measurement()
    torch.set_num_threads(1)
    rows = []
    print(f"bootstrap_intervals, {args.resamples} resamples, {args.images} images, median of {args.repeats}")
    for task, keys in KEYS.items():
        ev = pose_evaluator(args.images) if task == "pose" else dense_evaluator(task, args.images)
        t_boot = timed(partial(ev.bootstrap_intervals, keys, resamples=args.resamples), args.repeats)
        t_comp = timed(ev.compute, args.repeats)
        print(f"  {task:<9} n={ev.num_images:<5} {t_boot * 1000:8.1f} ms   "
              f"(compute(): {t_comp * 1000:7.1f} ms)   keys {keys}")
        rows.append({"task": task, "images": ev.num_images, "keys": list(keys), "bootstrap_ms": t_boot * 1000,
                     "compute_ms": t_comp * 1000})
    if args.json:
        write_measurement(args.json, "bootstrap intervals: milliseconds per task (one thread)",
                          {"resamples": args.resamples, "repeats": args.repeats, "tasks": rows},
                          started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
