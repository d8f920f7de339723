"""Entry point of ``sapiens2-bench``.

Each subcommand lives in its own module that defines ``register(subparsers)``; the module adds
its parser and sets ``func`` (called with the parsed namespace, returns an exit code). Heavy
imports stay inside the ``func`` so that ``--help`` and small commands start fast.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.cli import (
    convert,
    data,
    leaderboard,
    model_card,
    parity,
    predict,
    pretrain,
    probe,
    reproduce,
    run,
    system,
)
from benchmarks.cli import eval as eval_cmd
from sapiens2.errors import BenchError

# Subcommand modules, in the order shown by --help.
COMMANDS = [run, parity, model_card, predict, convert, eval_cmd, data, probe, pretrain, leaderboard,
            reproduce, system]


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand."""
    from sapiens2 import __version__

    parser = argparse.ArgumentParser(
        prog="sapiens2-bench",
        description="Reference benchmark and evaluation suite for Sapiens2.",
    )
    parser.add_argument("--version", action="version", version=f"sapiens2-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (BenchError, FileNotFoundError, ValueError, KeyError, RuntimeError) as e:
        if getattr(args, "debug", False):
            raise
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"sapiens2-bench {args.command}: error: {msg}", file=sys.stderr)
        return 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
