"""Speed of the vectorised COCO keypoint AP engine against stock xtcocotools (and faster-coco-eval).

Generates COCO keypoint GT and results (``evaluators.pose.synthetic``; default 308 keypoints and
10,000 GT instances), checks that both engines give the same ten stats, and prints the wall times
and ratios, measured side by side from the same in-memory JSON objects (parsing the JSON text is
not timed: both would pay it alike). ``faster-coco-eval`` is timed when it is importable.

Ours is timed end to end from the JSON objects (reading them into arrays, which is bounded by
unboxing Python floats, then the AP); the split is printed too.

Usage:
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/speed/coco_ap_speed.py [--instances 10000] [--keypoints 308]
    # with faster-coco-eval from a side venv (not a project dependency):
    PYTHONPATH=/tmp/fce_venv/lib/python3.11/site-packages .venv/bin/python benchmarks/speed/coco_ap_speed.py
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_keypoints  # noqa: E402
from evaluators.pose.coco_io import load_coco_gt, load_coco_results  # noqa: E402
from evaluators.pose.synthetic import make_keypoint_case, xtcocotools_stats  # noqa: E402


def _ours(gt: dict, results: list, sigmas: np.ndarray) -> dict:
    g, k = load_coco_gt(gt)
    d = load_coco_results(results, g, k)
    return evaluate_keypoints(g, d, sigmas).stats


def _ours_split(gt: dict, results: list, sigmas: np.ndarray) -> tuple[float, float]:
    """(seconds to read the JSON objects into arrays, seconds of the AP computation)."""
    t0 = time.perf_counter()
    g, k = load_coco_gt(gt)
    d = load_coco_results(results, g, k)
    t1 = time.perf_counter()
    evaluate_keypoints(g, d, sigmas)
    return t1 - t0, time.perf_counter() - t1


def _faster_coco_eval(gt: dict, results: list, sigmas: np.ndarray) -> dict | None:
    try:
        from faster_coco_eval import COCO, COCOeval_faster
    except ImportError:
        return None
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(copy.deepcopy(gt))
        coco_dt = coco_gt.loadRes(copy.deepcopy(results))
        ev = COCOeval_faster(coco_gt, coco_dt, "keypoints", kpt_oks_sigmas=sigmas)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return dict(zip(STAT_NAMES, (float(s) for s in ev.stats[:10])))


def _timed(fn, *args, repeats: int = 1):
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=10_000, help="approximate number of GT instances")
    ap.add_argument("--keypoints", type=int, default=308)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="best of N runs for every engine")
    ap.add_argument("--json", dest="json_out", help="write the timings to this JSON file")
    args = ap.parse_args(argv)

    if args.keypoints == 308:
        from sapiens2.reference import keypoints308

        sigmas = np.asarray(keypoints308()["sigmas"], dtype=np.float64)
    else:
        sigmas = np.random.default_rng(args.seed).uniform(0.025, 0.107, args.keypoints)
    # about 2 GT people per image with edge cases
    gt, results = make_keypoint_case(
        max(1, args.instances // 2), args.keypoints, seed=args.seed, max_people=3
    )
    print(
        f"data: {len(gt['images'])} images, {len(gt['annotations'])} GT instances, {len(results)} results, "
        f"{args.keypoints} keypoints"
    )

    t_ours, ours = _timed(_ours, gt, results, sigmas, repeats=args.repeats)
    t_xt, ref = _timed(xtcocotools_stats, gt, results, sigmas, repeats=args.repeats)
    t_read, t_eval = min((_ours_split(gt, results, sigmas) for _ in range(args.repeats)), key=sum)
    err = max(abs(ours[s] - ref[s]) for s in STAT_NAMES)
    rows = [("sapiens2 (vectorised)", t_ours), ("xtcocotools 1.14.3", t_xt)]
    out = {
        "images": len(gt["images"]),
        "gt_instances": len(gt["annotations"]),
        "results": len(results),
        "keypoints": args.keypoints,
        "seconds_ours": t_ours,
        "seconds_xtcocotools": t_xt,
        "ratio_xtcocotools": t_xt / t_ours,
        "max_abs_err_vs_xtcocotools": err,
        "seconds_ours_read": t_read,
        "seconds_ours_ap": t_eval,
    }
    t_fce, fce = _timed(_faster_coco_eval, gt, results, sigmas, repeats=args.repeats)
    if fce is not None:
        rows.append(("faster-coco-eval", t_fce))
        out.update(
            seconds_faster_coco_eval=t_fce,
            ratio_faster_coco_eval=t_fce / t_ours,
            max_abs_err_vs_faster_coco_eval=max(abs(ours[s] - fce[s]) for s in STAT_NAMES),
        )
    print(f"{'engine':<24}{'seconds':>10}{'x slower than ours':>20}")
    for name, t in rows:
        print(f"{name:<24}{t:>10.3f}{t / t_ours:>20.1f}")
    print(f"ours split: {t_read:.3f}s JSON objects -> arrays (Python float unboxing), {t_eval:.3f}s AP")
    print(f"max |ours - xtcocotools| over the ten stats: {err:.3g}")
    if fce is None:
        print("faster-coco-eval: not installed (pip install faster-coco-eval to include it)")
    else:
        print(f"max |ours - faster-coco-eval|: {out['max_abs_err_vs_faster_coco_eval']:.3g}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if err <= 1e-6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
