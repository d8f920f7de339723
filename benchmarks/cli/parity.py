"""The handler of ``sapiens2-bench parity``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.parity`.
"""

from __future__ import annotations

import math

from evaluators.parity import run_codec_case, run_metric_case
from sapiens2.models.parity import run_model_case
from sapiens2.parity import golden_set_dirs, run_golden_set
from sapiens2.utils_io import write_json_atomic


def _fmt(x) -> str:
    if x is None:
        return "per-key"
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:.3g}"


def run(args) -> int:
    import torch

    handlers = {"model": run_model_case, "metric": run_metric_case, "codec": run_codec_case}

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    dirs = golden_set_dirs(args.dir)
    results = []
    for d in dirs:
        for r in run_golden_set(d, handlers, only=args.case, verbose=args.debug):
            if len(dirs) > 1:
                r.name = f"{d.name}/{r.name}"
            results.append(r)
    width = max([len(r.name) for r in results] + [4])
    print(f"{'case':<{width}}  {'kind':<6}  {'max_abs_err':>11}  {'tolerance':>9}  {'time':>6}  result")
    for r in results:
        status = "PASS" if r.passed else "FAIL"
        line = (
            f"{r.name:<{width}}  {r.kind:<6}  {_fmt(r.max_abs_err):>11}  {_fmt(r.tolerance):>9}  "
            f"{r.seconds:5.2f}s  {status}"
        )
        if r.message:
            line += f"  ({r.message})"
        print(line)
    n_fail = sum(not r.passed for r in results)
    print(f"{len(results) - n_fail} passed, {n_fail} failed")
    if args.json_out:
        payload = {"golden_dir": str(args.dir), "cases": [r.to_dict() for r in results]}
        write_json_atomic(args.json_out, payload)
    return 1 if n_fail or not results else 0
