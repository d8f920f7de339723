"""The handler of ``sapiens2-bench reproduce``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.reproduce`.
"""

from __future__ import annotations

import argparse
import json

from benchmarks.cli.convert import parse_hw
from benchmarks.mainjob import default_data_dir
from benchmarks.probe.api import RunOptions, run_probe
from benchmarks.probe.protocol import default_protocol, quick_protocol
from benchmarks.reproduce.sources import data_statement
from benchmarks.reproduce.table1 import reproduce_table1
from benchmarks.reproduce.tables import (
    SIZES,
    TABLE_TASKS,
    checkpoint_path,
    evaluate_job,
    is_4k,
    official_input,
    plan,
    protocol_for,
    size_key,
    table_sizes,
)
from leaderboard.build import build_site
from leaderboard.catalog import TASK_METRICS, canonical_metric, canonical_model_key
from leaderboard.paper import load_paper_results
from leaderboard.report_md import fmt
from sapiens2.records.results import read_record
from sapiens2.records.view import ProtocolRef, RecordView
from sapiens2.tasks import task_names


def _arch_settings(value):
    if not value:
        return None
    from pathlib import Path

    text = Path(value).read_text(encoding="utf-8") if Path(value).is_file() else value
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--arch-settings: not JSON and not a file: {value!r} ({e})") from e
    if not isinstance(settings, dict) or not all(isinstance(v, dict) and "embed_dims" in v
                                                 for v in settings.values()):
        raise ValueError("--arch-settings: expected {arch: {embed_dims, num_layers, num_heads, ...}}")
    return settings


def run(args: argparse.Namespace) -> int:
    """Reproduce one table; returns the exit code (2 when nothing could run)."""
    if args.table == "table1":
        return reproduce_table1(args.out, json_path=args.json, force=args.force)

    print(data_statement(args.table))
    sizes = [s.strip().lower() for s in (args.sizes or "").split(",") if s.strip()]
    if args.table == "table2":
        return _table2(args, sizes)
    return _task_table(args, sizes)


def _task_table(args, sizes) -> int:
    from pathlib import Path

    task = TABLE_TASKS[args.table]
    known = table_sizes(task)
    sizes = sizes or list(known)
    unknown = [s for s in sizes if size_key(s) not in {size_key(k) for k in known}]
    if unknown:
        raise ValueError(f"--sizes: {args.table} ({task}) has no row for {', '.join(unknown)}; known: "
                         f"{', '.join(known)} (the paper's 1B-4K rows are in Tables 4 and 6 only)")
    jobs, missing = plan(task, args.checkpoint_root, args.data_root, sizes)
    _print_missing(missing)
    if args.data_root is None or any(m.startswith(("data", "--data-root")) for m in missing) or not jobs:
        print(f"{args.table} ({task}): nothing to evaluate")
        return 2
    settings = _arch_settings(args.arch_settings)

    out = Path(args.out)
    records = []
    for job in jobs:
        input_size = parse_hw(args.input_size) if args.input_size else official_input(job.size)
        if ProtocolRef.of(protocol_for(input_size, settings, job.size)).id:
            print(f"note: {job.model_name}: non-official setup ({input_size[0]}x{input_size[1]} input"
                  f"{', substituted arch settings' if settings else ''})")
        if is_4k(job.size):
            print(f"note: {job.model_name}: config {job.config_name}")
        records.append(evaluate_job(job, args.data_root, out / "results", settings, input_size,
                                    args.batch_size, args.max_samples, args.device))
        proto = RecordView.of(json.loads(records[-1].read_text())).protocol
        print(f"note: {job.model_name}: protocol {proto.id}: {proto.description}; never "
              "ranked inside the paper's table, no delta to its numbers")
    _print_comparison(records, task)
    print(f"\nmeasured on {args.data_root}; reported on the paper's in-house test set (see the data note "
          "above): a difference between the two columns is not a reproduction error by itself")
    _site(args, out)
    return 0


def _table2(args, sizes) -> int:
    from pathlib import Path

    sizes = sizes or list(SIZES)
    if any(s not in SIZES for s in sizes):
        raise ValueError(f"--sizes: table2 has rows for {', '.join(SIZES)} only; got {', '.join(sizes)}")
    protocol = quick_protocol() if args.quick else default_protocol()
    missing, ready = [], []
    for size in sizes:
        path = checkpoint_path(args.checkpoint_root, size, "pretrain") if args.checkpoint_root else None
        if path is not None and path.is_file():
            ready.append((size, path))
        else:
            missing.append(f"checkpoint {path or '--checkpoint-root'} (Sapiens2-{size.upper()} pretrained "
                           f"backbone, pretrain/sapiens2_{size}_pretrain.safetensors)")
    _print_missing(missing)
    if not ready:
        print("table2: nothing to probe")
        return 2
    if args.data_root:
        data = args.data_root
    else:
        data = default_data_dir(protocol)
    out = Path(args.out)
    paths = []
    for size, path in ready:
        paths += run_probe(f"sapiens2_{size}", ",".join(task_names()), data, out / "results",
                           protocol=protocol, checkpoint=str(path), options=RunOptions(device=args.device))
    ids = ", ".join(f"{t} {i}" for t, i in protocol.protocol_ids().items())
    print(f"\nour protocol (ids {ids}) on {data}; the paper's Table 2 protocol is unpublished, "
          "so its numbers are context only (no deltas):")
    _print_comparison(paths, None, table="Table 2")
    _site(args, out)
    return 0


def _print_missing(missing: list[str]) -> None:
    if missing:
        print("missing (place these to reproduce the rest):")
        for m in missing:
            print(f"  - {m}")


def _print_comparison(paths, task, table: str | None = None) -> None:
    paper = load_paper_results()
    print(f"\n{'model':<16} {'task':<9} {'metric':<22} {'measured':>11} {'reported':>9} {'delta':>9}  "
          "source")
    for path in paths:
        rec = RecordView.of(read_record(path))
        key = canonical_model_key(rec.model.name)
        rows = paper[(paper["model_key"] == key) & (paper["task"] == rec.task)]
        rows = rows[rows["table"] == table] if table else rows[rows["protocol_key"] == "eval"]
        # a delta only for a record of the paper's own protocol and data (no measured record is)
        same_protocol = table is None and not rec.protocol.id
        metrics = {}
        for raw, v in rec.metrics.items():
            name, alias = canonical_metric(rec.task, raw)
            if name not in metrics or not alias:
                metrics[name] = v
        for spec in TASK_METRICS[rec.task]:
            value = metrics.get(spec.key)
            ref = rows[rows["metric"] == spec.key]
            if value is None and not len(ref):
                continue
            ours = None if value is None else value * spec.scale
            rep = ref["value"].iloc[0] * spec.scale if len(ref) else None
            delta = ours - rep if (same_protocol and ours is not None and rep is not None) else None
            src = ref["table"].iloc[0] if len(ref) else "-"
            print(f"{rec.model.name:<16} {rec.task:<9} {spec.label:<22} {fmt(ours):>11} "
                  f"{fmt(rep):>9} "
                  f"{fmt(delta, signed=True):>9}  {src}")


def _site(args, out) -> None:
    if args.no_site:
        return

    paths = build_site([out / "results"], out / "site", include_paper=True,
                       title=f"sapiens2-bench: reproduction of {args.table}")
    print(f"\nreport: {paths['html']}")
