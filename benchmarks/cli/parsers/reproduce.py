"""``sapiens2-bench reproduce TABLE``: reproduce a table of the Sapiens2 paper.

- ``table1``: the model card (params, FLOPs), offline; written to ``--out``/table1/ and reused while
  its inputs (reference data, counting code, torch version) are unchanged (``--force`` recomputes).
- ``table2``: dense probing of the Sapiens2 backbones (``--checkpoint-root`` ``pretrain/``) under
  our probing protocol; the paper's decoder and schedule are unpublished, so the printed Table 2
  numbers are shown for context, never as the target of a delta.
- ``table3`` .. ``table7`` (pose, seg, pointmap, normal, albedo): the official task models
  (``--checkpoint-root`` in the official layout) evaluated on ``--data-root`` with the official
  protocol; prints measured vs reported (no delta: the data differ) and writes result records, each
  labelled with what it was measured on and kept out of the paper's tables. Tables 4 and 6 also
  have a 1B-4K row (``--sizes 1b-4k``, input 4096x3072).

The paper's test sets (Tables 2-7) are in-house and not public: every table command says so, and
what it measures on your ``--data-root`` is the official models on other data. Whatever is missing
(checkpoints, data) is listed with the path where it goes; ``sapiens2-bench download`` fetches the
public checkpoints into that layout.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler
from benchmarks.reproduce.table_help import table_description
from benchmarks.reproduce.table_rows import TABLES


class _TableHelp(argparse.Action):
    """``--help``: with a table named before it (``reproduce table4 --help``), that table's description."""

    def __call__(self, parser, namespace, values, option_string=None):
        table = getattr(namespace, "table", None)
        if table in TABLES:
            parser.description = table_description(table)
        parser.print_help()
        parser.exit()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help=command_help("reproduce"),
                       description=__doc__.split("\n\n", 1)[1], add_help=False)
    p.add_argument("-h", "--help", action=_TableHelp, nargs=0,
                   help="show this help; after a table name (reproduce table4 --help): that table's")
    p.add_argument("table", choices=TABLES)
    p.add_argument("--checkpoint-root", default=None,
                   help="official checkpoint layout (pretrain/, pose/, seg/, ...)")
    p.add_argument("--data-root", default=None, help="test split folder (table2: default embedded synthetic)")
    p.add_argument("--out", default="sapiens2-bench-reproduce", help="output folder (records, site)")
    p.add_argument("--sizes", default=None,
                   help="model sizes to evaluate (default: every row of the table: 0.4b,0.8b,1b,5b, and "
                        "1b-4k in tables 4 and 6)")
    p.add_argument("--input-size", default=None,
                   help="model input HxW (default: the official one, 1024x768, 4096x3072 for 1b-4k; "
                        "another size gets its own protocol id)")
    p.add_argument("--arch-settings", default=None,
                   help="JSON (or file) {arch: settings} substituted for official archs (tests; "
                        "its own protocol id)")
    p.add_argument("--max-samples", type=int, default=0, help="evaluate only the first N samples (0: all)")
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="table2: the tiny probing protocol")
    p.add_argument("--json", default=None, help="table1: also write the model card JSON here")
    p.add_argument("--force", action="store_true", help="table1: recompute even if --out holds a card "
                                                         "computed from the same inputs")
    p.add_argument("--no-site", action="store_true", help="do not build the leaderboard site")
    p.add_argument("--device", default="cpu")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("reproduce"))
