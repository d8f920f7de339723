"""The handler of ``sapiens2-bench probe``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.probe`.
"""

from __future__ import annotations

import os
import sys

from benchmarks.embedded_split import check_generator_flag, default_data_dir
from benchmarks.mainjob import tasks_of_data
from benchmarks.probe.api import RunOptions, run_probe, seed_list
from benchmarks.probe.backbones import (
    REFERENCE_BACKBONES,
    backbone_table,
    format_params,
    resolve_backbone_cfg,
)
from benchmarks.probe.data.loader_guard import TIMEOUT_ENV
from benchmarks.probe.protocol import default_protocol, quick_protocol
from benchmarks.probe.records.summary import summary_table
from sapiens2 import distributed as dist_utils
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView
from sapiens2.tasks import task_names
from sapiens2.utils_io import read_json


def _protocol(args):
    base = quick_protocol() if args.quick else default_protocol()
    if not args.protocol:
        return base
    overrides = read_json(args.protocol)
    if not isinstance(overrides, dict):
        raise ValueError(f"{args.protocol}: expected a JSON object of ProbeProtocol fields")
    try:
        return base.replace(**overrides)
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"--protocol {args.protocol}: {e.args[0] if e.args else e}") from e


def _weights(args) -> str | None:
    """``--weights`` (or the deprecated ``--checkpoint``) as a path."""
    if args.checkpoint:
        print("sapiens2-bench probe: --checkpoint is deprecated; use --weights", file=sys.stderr)
        if args.weights and args.weights != args.checkpoint:
            raise ValueError("--weights and --checkpoint (its deprecated alias) name different files")
    path = args.weights or args.checkpoint
    if path and args.backbone and path.startswith(f"{args.backbone}="):
        path = path[len(args.backbone) + 1 :]
    return path


def _tasks(args, data, protocol, say: bool = True) -> str:
    """``--tasks``, or the tasks the data has (saying which were skipped, and why, when ``say``)."""
    if args.tasks:
        return args.tasks
    tasks, note = tasks_of_data(data, protocol)
    if note and say:
        print(f"probe: {note}", file=sys.stderr)
    return tasks


def list_backbones() -> str:
    """The ``--list-backbones`` table: name, family, parameters ("-": no weights) and weights."""
    rows = backbone_table()
    w = max(len(r["name"]) for r in rows)
    f = max(len(r["family"]) for r in rows)
    lines = [f"{'name':<{w}}  {'family':<{f}}  {'params':>8}  weights"]
    for r in rows:
        lines.append(f"{r['name']:<{w}}  {r['family']:<{f}}  {format_params(r['params']):>8}  {r['weights']}")
    return "\n".join(lines)


def run(args) -> int:
    """Run the probe; returns the exit code."""
    import json

    if args.list_backbones:
        print(list_backbones())
        return 0
    protocol = _protocol(args)
    if args.show_protocol:
        # each task's id and the knobs it covers (the shared ones, its settings, its read-out's)
        per_task = {t: {"protocol_id": protocol.protocol_id(t), "covers": protocol.task_protocol(t)}
                    for t in protocol.tasks}
        print(json.dumps({"per_task": per_task, "protocol": protocol.to_dict()}, indent=2))
        return 0
    if not args.backbone:
        raise ValueError("--backbone is required (see --list-backbones)")
    check_generator_flag(args.generator, args.data, quick=args.quick)
    weights = _weights(args)
    if args.backbone not in REFERENCE_BACKBONES:
        resolve_backbone_cfg(args.backbone)  # an unknown name or a bad module:Class fails before any work

    seeds = seed_list(str(args.seeds))  # before any work
    if args.loader_timeout is not None:  # the loader reads its setting from the environment

        if not 0 <= args.loader_timeout < float("inf"):
            raise ValueError(
                f"--loader-timeout: expected seconds >= 0 (0: wait forever), got {args.loader_timeout}"
            )
        os.environ[TIMEOUT_ENV] = repr(args.loader_timeout)
    with dist_utils.process_group(args.device):
        data = args.data or default_data_dir(protocol, quick=args.quick, generator=args.generator)
        tasks = _tasks(args, data, protocol, say=dist_utils.is_main())
        paths = run_probe(
            args.backbone,
            tasks,
            data,
            args.out,
            seeds=seeds,
            protocol=protocol,
            checkpoint=weights,
            options=RunOptions(device=args.device, workers=args.workers, sample_cache=args.sample_cache,
                               cache_dir=args.feature_cache),
        )
        if dist_utils.is_main():
            _print_summary(paths)
    return 0


def _print_summary(paths) -> None:
    """The records written: headline metric per task with its 95% interval and n, then the files."""
    records = [RecordView.of(read_record(p)) for p in paths]
    tasks = [t for t in task_names() if any(r.task == t for r in records)]
    print(summary_table(records, tasks))
    vocab = {r.task: r.dataset.as_dict().get("vocabulary") for r in records}
    named = [f"{t} {k} {v}" for t in tasks for k, v in (vocab.get(t) or {}).items()]
    if named:  # which keypoint / label set each task's numbers are in
        print("vocabulary: " + "; ".join(named))
    for p in paths:
        print(f"  {p}")
