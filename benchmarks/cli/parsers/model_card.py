"""``sapiens2-bench model-card``: the paper's Table 1 plus the README's 0.1B and 1B-4K rows, recomputed.

Exact parameter counts and FLOPs of every official Sapiens2 backbone, counted on the meta device (no
weights are allocated: 10-20 s and 350 MB peak RSS on the 2-core development VM, 2026-11-30), side by
side with the printed values and the difference, and a note on why the FLOPs differ (with the measured
difference per model). FLOPs convention: see ``sapiens2.models.flops.CARD_CONVENTION``; the JSON also
carries the total with attention (2 FLOPs per MAC) so every convention can be compared.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``model-card`` subcommand."""
    p = sub.add_parser("model-card", help=command_help("model-card"),
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="OUT", help="write {'rows': [...], 'convention': ...} to OUT")
    p.add_argument("--csv", metavar="OUT", help="write the table as CSV to OUT")
    p.add_argument("--arch", action="append", help="only these archs (repeatable; default: all)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("model-card"))
