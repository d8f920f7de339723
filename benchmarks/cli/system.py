"""The handler of ``sapiens2-bench system``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.system`.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.convert import parse_hw
from benchmarks.systems.mediapipe_records import run_mediapipe


def run(args: argparse.Namespace) -> int:
    """Evaluate the system and write its records; returns the exit code."""
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    written = run_mediapipe(args.out, data=args.data, n=args.n, input_size_hw=parse_hw(args.input_size),
                            min_detection_confidence=args.min_detection_confidence, tasks=tasks,
                            progress=not args.no_progress)
    for p in written:
        print(f"wrote {p}")
    return 0
