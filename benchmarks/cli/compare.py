"""``sapiens2-bench compare RESULTS_DIR A B``: paired comparison of two backbones' probe records.

For each task both backbones were probed on, the probe's headline metric of A and B, the
difference A - B and its 95% paired bootstrap interval (the same resampled test images for both:
:mod:`benchmarks.probe.records.compare`), n and a verdict. Records are paired only under one protocol,
dataset, n, bootstrap seed, resamples and test-image ids, each with its ``.bootstrap.npz`` side file.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help
from benchmarks.probe.records.compare import format_comparisons, paired_comparisons
from sapiens2.utils_io import write_json_atomic


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help=command_help("compare"),
                       description=__doc__.split("\n\n")[1])
    p.add_argument("results", metavar="RESULTS_DIR", help="folder of probe records (e.g. OUT/results of run)")
    p.add_argument("a", metavar="A", help="backbone name (the records' model.name)")
    p.add_argument("b", metavar="B", help="the other backbone")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: every task both have)")
    p.add_argument("--protocol", default=None,
                   help="protocol id(s) to compare under, comma-separated (each task has its own id; "
                        "needed only when both have records of several)")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write the comparisons as JSON (atomically)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the paired comparison table (and write it as JSON with ``--json``); returns the exit code."""
    from pathlib import Path

    if not Path(args.results).is_dir():
        raise FileNotFoundError(2, "no such results folder", args.results)
    comps = paired_comparisons(args.results, args.a, args.b, tasks=args.tasks, protocol_id=args.protocol)
    print(format_comparisons(comps))
    if args.json:
        write_json_atomic(args.json, {"comparisons": comps})
        print(f"wrote {args.json}")
    return 0
