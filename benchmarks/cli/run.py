"""The handler of ``sapiens2-bench run``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.run`.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.embedded_split import check_generator_flag
from benchmarks.mainjob import (
    DEFAULT_BACKBONES,
    QUICK_BACKBONES,
    TASKS,
    parse_weights,
    run_main_job,
    tasks_of_data,
)
from benchmarks.probe.protocol import default_protocol, quick_protocol
from benchmarks.probe.records.runkey import seed_list


def parse_compare(items: list[str], names: list[str]) -> list[tuple[str, str]]:
    """The ``--compare A:B`` pairs, each a pair of backbones of the run.

    A name may itself hold a colon (``package.module:Class``): ``A:B`` is split at the one colon
    that leaves two backbones of the run.

    Raises:
        ValueError: an item that is not two different backbones of the run.

    Example:
        >>> parse_compare(["pixels:m.x:Cls"], ["m.x:Cls", "pixels"])
        [('pixels', 'm.x:Cls')]
    """
    pairs = []
    for item in items:
        splits = [(item[:i], item[i + 1:]) for i, ch in enumerate(item) if ch == ":"]
        ok = [(a, b) for a, b in splits if a in names and b in names and a != b]
        if len(ok) != 1:
            raise ValueError(f"--compare {item!r}: expected A:B with two different backbones of the run "
                             f"(backbones: {', '.join(names)})")
        pairs.append(ok[0])
    return pairs


def run(args: argparse.Namespace) -> int:
    """Parse the flags, run the main job (:func:`benchmarks.mainjob.run_main_job`); returns the exit code."""
    seeds = seed_list(str(args.seeds))  # before any work: names --seeds, refuses repeats

    check_generator_flag(args.generator, args.data, quick=args.quick)
    default = QUICK_BACKBONES if args.quick else DEFAULT_BACKBONES
    names = [b.strip() for b in args.backbones.split(",") if b.strip()] if args.backbones else list(default)
    tasks = args.tasks or TASKS
    if args.tasks is None and args.data is not None:
        tasks, note = tasks_of_data(args.data, quick_protocol() if args.quick else default_protocol())
        if note:
            print(f"run: {note}", file=sys.stderr)
    job = run_main_job(args.out, quick=args.quick, backbones=names, tasks=tasks, seeds=seeds,
                       data=args.data, generator=args.generator, weights=parse_weights(args.weights),
                       include=args.include,
                       compare=parse_compare(args.compare, names), include_paper=not args.no_paper,
                       mediapipe=not args.no_mediapipe, device=args.device,
                       keep_going=args.keep_going and not args.debug)
    return job.exit_code
