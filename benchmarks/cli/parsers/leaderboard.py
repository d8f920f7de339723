"""``sapiens2-bench leaderboard {build,validate,schema,paper}``: reports from result records."""

from __future__ import annotations

from benchmarks.cli.commands import command_help, handler
from sapiens2.tasks import task_names


def register(sub) -> None:
    p = sub.add_parser("leaderboard", help=command_help("leaderboard"))
    lsub = p.add_subparsers(dest="leaderboard_command", metavar="ACTION")

    b = lsub.add_parser("build", help="write a Markdown report and a self-contained HTML page")
    b.add_argument("results", nargs="+", help="result record files or folders (searched recursively)")
    b.add_argument("--out", required=True, metavar="SITE", help="output folder")
    b.add_argument("--include-paper", action="store_true", help="add the paper's reported numbers")
    b.add_argument("--title", default="sapiens2-bench leaderboard", help="page title")
    b.add_argument("--no-figures", action="store_true", help="skip the matplotlib figures")
    b.add_argument("--skip-unreadable", action="store_true",
                   help="leave out unreadable or invalid result files (each is listed) instead of failing")
    b.add_argument("--comparisons", metavar="FILE", action="append", default=None,
                   help="add the paired comparisons of a comparisons.json (run, or compare --json), checked "
                   "against the records; may be given more than once")
    b.set_defaults(func=handler("leaderboard", "run_build"))

    v = lsub.add_parser("validate",
                        help="check result records: schema, config and record hashes, protocol ids")
    v.add_argument("results", nargs="+", help="result record files or folders")
    v.set_defaults(func=handler("leaderboard", "run_validate"))

    s = lsub.add_parser("schema", help="print (or write) the result record JSON schema")
    s.add_argument("--out", metavar="FILE", help="write the schema to FILE")
    s.set_defaults(func=handler("leaderboard", "run_schema"))

    r = lsub.add_parser("paper", help="print the paper's reported numbers in our metric names and units")
    r.add_argument("--task", choices=task_names())
    r.add_argument("--table", help="e.g. 'Table 3'")
    r.set_defaults(func=handler("leaderboard", "run_paper"))
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
