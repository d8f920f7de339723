"""``sapiens2-bench compare RESULTS_DIR A B``: paired comparison of two backbones' probe records.

For each task both backbones were probed on, the probe's headline metric of A and B, the
difference A - B and its 95% paired bootstrap interval (the same resampled test images for both:
:mod:`benchmarks.probe.records.compare`), n and a verdict. Records are paired only under one protocol,
dataset, n, bootstrap seed, resamples and test-image ids, each with its ``.bootstrap.npz`` side file.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


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
    p.set_defaults(func=handler("compare"))
