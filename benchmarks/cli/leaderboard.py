"""The handlers of ``sapiens2-bench leaderboard`` (build, validate, schema, paper: ``run_ACTION(args)``),
imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.leaderboard`.
"""

from __future__ import annotations

from benchmarks.mainjob import known_protocol_names
from benchmarks.probe.records.compare import check_comparisons
from leaderboard.build import build_site, summary_lines
from leaderboard.paper import load_paper_results
from sapiens2.records.results import RecordError, find_result_files, load_records, read_record
from sapiens2.records.schema import result_schema
from sapiens2.records.view import RecordView
from sapiens2.utils_io import read_json, write_json_atomic


def run_build(args) -> int:
    import sys

    skipped: list[str] | None = [] if args.skip_unreadable else None
    comparisons = None
    for path in args.comparisons or []:
        saved = read_json(path)
        listed = saved.get("comparisons") if isinstance(saved, dict) else None
        if not isinstance(listed, list):
            raise ValueError(f"{path}: expected a JSON object with a 'comparisons' list "
                             "(OUT/comparisons.json of run, or compare --json)")
        records = load_records(args.results, skip_foreign=True, skipped=[] if args.skip_unreadable else None)
        comparisons = check_comparisons((comparisons or []) + listed, records, where=str(path))
    paths = build_site(args.results, args.out, include_paper=args.include_paper, title=args.title,
                       with_figures=not args.no_figures, skipped=skipped,
                       protocol_names=known_protocol_names(), comparisons=comparisons)
    for problem in skipped or []:
        print(f"skipped  {problem}", file=sys.stderr)
    for line in summary_lines(paths):
        print(line)
    print(f"report: {paths['html']}")
    return 0


def run_validate(args) -> int:
    bad = 0
    for f in find_result_files(args.results):
        try:
            rec = RecordView.of(read_record(f))
        except RecordError as e:
            bad += 1
            print(f"INVALID  {e}")
            continue
        except (OSError, UnicodeDecodeError) as e:
            bad += 1
            print(f"INVALID  {f}: unreadable ({type(e).__name__}: {e})")
            continue
        sealed = "" if rec.record_hash else "; schema v1: no record hash, edits cannot be detected"
        print(f"ok       {f}  ({rec.task}, {rec.model.name}, {rec.protocol.kind}{sealed})")
    return 1 if bad else 0


def run_schema(args) -> int:
    import json

    if args.out:
        write_json_atomic(args.out, result_schema())
        print(f"wrote {args.out}")
    else:
        print(json.dumps(result_schema(), indent=2))
    return 0


def run_paper(args) -> int:
    import pandas as pd

    df = load_paper_results()
    if args.task:
        df = df[df["task"] == args.task]
    if args.table:
        df = df[df["table"] == args.table]
    if not len(df):
        raise ValueError("no reported numbers match the filter")
    with pd.option_context("display.max_rows", None, "display.width", 160):
        print(df[["table", "task", "model", "metric", "value_printed", "value", "protocol_key"]]
              .to_string(index=False))
    return 0
