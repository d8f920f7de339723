"""The handler of ``sapiens2-bench model-card``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.model_card`.
"""

from __future__ import annotations

import argparse

from benchmarks.reproduce.model_card import print_model_card


def run(args: argparse.Namespace) -> int:
    """Compute, print and optionally write the model card; returns the exit code."""
    return print_model_card(args.arch, args.json, args.csv)
