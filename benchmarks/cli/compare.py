"""The handler of ``sapiens2-bench compare``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.compare`.
"""

from __future__ import annotations

import argparse

from benchmarks.probe.records.compare import format_comparisons, paired_comparisons
from sapiens2.utils_io import write_json_atomic


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
