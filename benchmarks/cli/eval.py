"""The handlers of ``sapiens2-bench eval``: ``run(args)``, ``run_pose``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.eval`.
"""

from __future__ import annotations

import math

from evaluators.folders import evaluate_folders
from evaluators.pose.cli import run_pose_eval
from sapiens2.utils_io import write_json_atomic
from sapiens2.vocab import label_set


def run_pose(args) -> int:
    return run_pose_eval(args)


def _print_table(task: str, metrics: dict) -> None:
    rows = [(k, v) for k, v in metrics.items() if isinstance(v, (int, float))]
    width = max(len(k) for k, _ in rows)
    print(f"{task} metrics")
    for k, v in rows:
        txt = "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.6g}"
        print(f"  {k:<{width}}  {txt:>12}")


def run(args) -> int:
    kwargs = {}
    if args.task == "seg" and args.num_classes is not None and args.num_classes < 1:
        raise ValueError(f"--num-classes {args.num_classes}: must be at least 1")
    if args.task == "seg":
        kwargs = {"num_classes": 29 if args.num_classes is None else args.num_classes,
                  "ignore_index": 255 if args.ignore_index is None else args.ignore_index,
                  "nan_to_num": args.nan_to_num}
        if args.label_set:
            ls = label_set(args.label_set)
            for flag, given, want in (("--num-classes", args.num_classes, ls.num_classes),
                                      ("--ignore-index", args.ignore_index, ls.ignore_index)):
                if given is not None and given != want:
                    raise ValueError(f"{flag} {given} disagrees with --label-set {ls.name} ({want})")
            kwargs.update(num_classes=ls.num_classes, ignore_index=ls.ignore_index, label_set=ls)
        if args.pred_label_set:
            kwargs.update(pred_label_set=args.pred_label_set, unmapped=args.unmapped)
    out = evaluate_folders(args.task, args.pred, args.gt, args.mask, batch_size=args.batch_size,
                           device=args.device, progress=True, png_max=args.png_max,
                           allow_empty_masks=args.allow_empty_masks, **kwargs)
    _print_table(args.task, out["metrics"])
    if args.json_out:
        write_json_atomic(args.json_out, out)
        print(f"wrote {args.json_out}")
    return 0
