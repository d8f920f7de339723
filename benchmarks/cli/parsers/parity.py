"""``sapiens2-bench parity DIR``: run a golden set and exit non-zero on any failure."""

from __future__ import annotations

from benchmarks.cli.commands import command_help, handler


def register(sub) -> None:
    p = sub.add_parser("parity", help=command_help("parity"))
    p.add_argument(
        "dir", help="golden folder with manifest.json, or a folder of such folders (each is run)"
    )
    p.add_argument("--json", dest="json_out", metavar="OUT", help="write the results as JSON")
    p.add_argument("--case", action="append", help="run only this case (repeatable)")
    p.add_argument("--debug", action="store_true", help="print tracebacks of failing handlers")
    p.set_defaults(func=handler("parity"))
