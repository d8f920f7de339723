"""``predict --dtype bf16`` against float32: error of every task's outputs and the forward-time ratio.

For each task, one randomly initialised task model (the released 0.4b task config with its backbone
swapped for ``--arch`` and its input set to ``--size``; the pointmap scale MLP's input follows the
grid) runs the same photo (Grace Hopper, shipped with matplotlib) through ``sapiens2.inference``'s
``predict_array`` in float32 and in bfloat16 autocast (same weights). Printed per task: max / mean
abs error of the raw head output, the task's final quantity (seg: label agreement %; normal: angle
in degrees; pointmap: point error in the model's units, metres with the canonical camera; albedo:
abs error; pose: keypoint distance in image pixels) and the forward time of each precision: of
the measured pass (fp32 runs first, cold), or with ``--rounds N`` the median of N interleaved
warm rounds. Random weights: the error of trained weights may differ.

Example:
    nice -n 10 python benchmarks/speed/predict_precision.py --arch sapiens2_0.1b --size 256x192 --json o.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from benchmarks.results import start_measurement, write_measurement
from sapiens2.datasets.io import read_rgb
from sapiens2.inference import predict_array, to_tensor
from sapiens2.models.builder import build_model
from sapiens2.models.heads.pointmap import scale_branch_grid
from sapiens2.reference import official_archs, official_task_configs
from sapiens2.runtime import with_precision
from sapiens2.tasks import get_task


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="sapiens2_0.1b", help="official backbone arch")
    p.add_argument("--size", default="256x192", help="HxW model input")
    p.add_argument("--tasks", default="seg,normal,pointmap,albedo,pose")
    p.add_argument("--rounds", type=int, default=0,
                   help="extra timed rounds (each runs fp32 then bf16 once) after the measured pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the results here (a benchmarks.results measurement file)")
    return p.parse_args(argv)


def task_config(task: str, arch: str, size_hw: tuple[int, int]) -> dict:
    """The released 0.4b config of ``task`` with backbone ``arch`` at input ``size_hw``."""
    import copy

    estimator = get_task(task).estimator
    released = [c["model"] for c in official_task_configs().values() if c["model"]["type"] == estimator]
    cfg = copy.deepcopy(next(m for m in released if m["backbone"]["arch"] == "sapiens2_0.4b"))
    settings = official_archs()["archs"][arch]["settings"]
    cfg["backbone"].update(arch=arch, img_size=list(size_hw))
    cfg["decode_head"]["in_channels"] = settings["embed_dims"]
    head = cfg["decode_head"]
    if head["type"] == "PointmapHead":
        p = cfg["backbone"].get("patch_size", 16)
        h, w = scale_branch_grid(size_hw[0] // p, size_hw[1] // p, head["scale_conv_kernel_sizes"])
        head["scale_final_layer"][0] = head["scale_conv_out_channels"][-1] * h * w
    return cfg


def compare(task: str, a, b) -> dict:
    """Errors of prediction ``b`` (bf16) against ``a`` (fp32), both :class:`Prediction`."""
    x, y = a.array.astype(np.float64), b.array.astype(np.float64)
    if task == "seg":
        return {"label_agreement_pct": float((a.array == b.array).mean() * 100)}
    if task == "pose":
        d = np.linalg.norm(x[:, :2] - y[:, :2], axis=1)
        return {"keypoint_px_median": float(np.median(d)), "keypoint_px_p90": float(np.percentile(d, 90)),
                "keypoints_within_1px_pct": float((d <= 1).mean() * 100),
                "keypoints_within_4px_pct": float((d <= 4).mean() * 100),
                "score_abs_max": float(np.abs(x[:, 2] - y[:, 2]).max())}
    diff = np.abs(x - y)
    out = {"abs_max": float(diff.max()), "abs_mean": float(diff.mean())}
    if task == "normal":
        norms = np.maximum(np.linalg.norm(x, axis=0) * np.linalg.norm(y, axis=0), 1e-12)
        cos = np.clip((x * y).sum(0) / norms, -1, 1)
        ang = np.degrees(np.arccos(cos))
        out.update(angle_deg_mean=float(ang.mean()), angle_deg_median=float(np.median(ang)),
                   angle_deg_p99=float(np.percentile(ang, 99)), angle_deg_max=float(ang.max()))
    if task == "pointmap":
        d = np.linalg.norm(x - y, axis=0)
        out.update(point_dist_mean=float(d.mean()), point_dist_max=float(d.max()),
                   depth_abs_mean=float(np.abs(x[2]).mean()), scale_fp32=a.meta["scale"],
                   scale_bf16=b.meta["scale"])
    return out


def raw_error(out_a, out_b) -> dict:
    """Max / mean abs difference of the raw head outputs (a tensor or a tuple of them)."""
    ta = out_a if isinstance(out_a, (tuple, list)) else (out_a,)
    tb = out_b if isinstance(out_b, (tuple, list)) else (out_b,)
    diffs = [(p.float() - q.float()).abs() for p, q in zip(ta, tb)]
    return {"raw_abs_max": max(float(d.max()) for d in diffs),
            "raw_abs_mean": float(torch.cat([d.reshape(-1) for d in diffs]).mean()),
            "raw_ref_abs_mean": float(torch.cat([p.float().abs().reshape(-1) for p in ta]).mean())}


def run_task(task: str, args, rgb: np.ndarray) -> dict:
    """Build, run in both precisions, compare, time."""
    import cv2

    size_hw = tuple(int(v) for v in args.size.lower().split("x"))
    torch.manual_seed(args.seed)
    model = build_model(task_config(task, args.arch, size_hw)).eval()
    preds, raws, times = {}, {}, {"fp32": [], "bf16": []}
    x = to_tensor(cv2.resize(rgb, (size_hw[1], size_hw[0]), interpolation=cv2.INTER_LINEAR))
    for dtype in ("fp32", "bf16"):
        with_precision(model, "cpu", dtype)
        start: list[float] = []

        def pre_hook(*_, start=start):
            start.append(time.perf_counter())

        def post_hook(m, i, out, d=dtype, start=start):
            times[d].append(time.perf_counter() - start[-1])
            raws[d] = out

        pre = model.register_forward_pre_hook(pre_hook)
        post = model.register_forward_hook(post_hook)
        preds[dtype] = predict_array(model, rgb, task, flip_test=False)
        pre.remove()
        post.remove()
    for _ in range(args.rounds):
        for dtype in ("fp32", "bf16"):
            with_precision(model, "cpu", dtype)
            t0 = time.perf_counter()
            with torch.inference_mode():
                model(x)
            times[dtype].append(time.perf_counter() - t0)
    # The measured pass runs fp32 first, cold (allocations, first-call set-up): with timed rounds,
    # only the interleaved warm rounds count.
    warm = {d: (t[1:] if args.rounds else t) for d, t in times.items()}
    t32, t16 = statistics.median(warm["fp32"]), statistics.median(warm["bf16"])
    return {"task": task, "arch": args.arch, "size": args.size, **raw_error(raws["fp32"], raws["bf16"]),
            **compare(task, preds["fp32"], preds["bf16"]), "forward_s_fp32": t32, "forward_s_bf16": t16,
            "speed_ratio_fp32_over_bf16": t32 / t16}


def main(argv=None) -> int:
    """Run every task and print one JSON line per task."""
    import matplotlib.cbook as cbook

    started = start_measurement()
    args = parse_args(argv)
    rgb = read_rgb(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    results = []
    for task in args.tasks.split(","):
        results.append({**run_task(task, args, rgb), "threads": torch.get_num_threads()})
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        write_measurement(args.json, "bf16 autocast against float32 per task model", results, started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
