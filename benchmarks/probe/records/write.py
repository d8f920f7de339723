"""The probe's records: one per (task, seed), the mean over seeds, and the few-test-images warning."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

from benchmarks.probe.readout.base import get_readout
from benchmarks.probe.records.context import ProbeTask, ReadoutResult, RecordSlot, RunContext
from benchmarks.probe.records.evaluate import bootstrap_intervals_field
from benchmarks.probe.records.headline import interval_metrics, seed_intervals
from benchmarks.probe.records.sidefile import side_path
from evaluators.base import Evaluator
from evaluators.metric_decl import record_declarations
from sapiens2 import distributed as dist_utils
from sapiens2.records.results import make_record, write_record
from sapiens2.records.view import record_views
from sapiens2.tasks import get_task

# Below this many test images a record's bootstrap interval is flagged as meaningless: a percentile
# bootstrap over so few images badly under-covers (it can only resample the handful of values seen).
MIN_INTERVAL_IMAGES = 30


def probe_record(ctx: RunContext, task: ProbeTask, slot: RecordSlot, metrics: dict, intervals: dict,
                 result: ReadoutResult, metric_decls: dict | None = None) -> dict:
    """One (task, seed) record of a probe run (``ctx``: what every record of the run shares).

    Args:
        ctx: the run's label, backbone description, protocol, data source and device.
        task: the probe task.
        slot: the record's seed, path and run identity.
        metrics: the evaluator's metrics.
        intervals: the record's ``intervals`` field.
        result: the read-out's info, the seconds per stage (a dict here) and the sample counts.
        metric_decls: what each metric means (``evaluators.metric_decl.record_declarations``).
    """
    protocol, label, bb_desc, source = ctx.protocol, ctx.label, ctx.backbone, ctx.source
    seed, info = slot.seed, result.info
    pid = protocol.protocol_id(task.name)
    vocabulary = task.vocabulary()
    readout = get_readout(protocol.task(task.name).decoder)
    notes = readout.notes(info)
    few = few_images_warning(intervals, task.name)
    if few:
        notes += f"; WARNING: {few}"
        if dist_utils.is_main():
            print(f"probe {label} {task.name} seed {seed}: WARNING: {few}", file=sys.stderr)
    rec = make_record(
        model={
            "name": label,
            "backbone": str(bb_desc.get("arch") or bb_desc.get("family") or bb_desc["type"]),
            # a backbone without weights has no parameter count to show ("-")
            "params": None if bb_desc.get("weights") == "none" else bb_desc.get("params"),
            "weights": str(bb_desc.get("weights")),
        },
        task=task.name,
        dataset={
            "name": source.name,
            "split": protocol.test_split,
            "content_hash": source.content_hash(task.name, protocol.test_split),
            "num_samples": int(result.num_test),
            **({"vocabulary": vocabulary} if vocabulary else {}),
        },
        protocol={
            "kind": "probe",
            "protocol_id": pid,
            "description": f"{readout.description} (benchmarks.probe.protocol.ProbeProtocol)",
        },
        metrics=metrics,
        intervals=intervals,
        config={
            "protocol": protocol.task_protocol(task.name),
            "backbone": bb_desc,
            "task": task.name,
            **({"vocabulary": vocabulary} if vocabulary else {}),
            "seed": seed,
            "num_train_samples": int(result.num_train),
            "shortcut": info["shortcut"],
            "run": slot.identity,
        },
        seeds=[seed],
        timings=result.timings,
        device=ctx.device,
        notes=notes,
        metric_decls=metric_decls,
    )
    return rec


def write_evaluated_record(ctx: RunContext, task: ProbeTask, slot: RecordSlot, evaluator: Evaluator,
                           metrics: dict, result: ReadoutResult) -> dict:
    """The record of one (task, seed) whose ``evaluator`` has seen the whole test split (``metrics``:
    what it computed): its bootstrap intervals (and side file beside ``slot.path``), then the record,
    written by rank 0.

    ``result.timings`` may be a callable: it is called once the intervals are computed (so the
    bootstrap counts in the evaluation's seconds).
    """
    protocol = ctx.protocol
    intervals = bootstrap_intervals_field(
        evaluator, interval_metrics(task.name, evaluator), resamples=protocol.bootstrap_resamples,
        level=protocol.interval_level, seed=protocol.bootstrap_seed, side_path=side_path(slot.path),
    )
    decls = record_declarations(evaluator.declared_metrics(), metrics, get_task(task.name).headline)
    timings = result.timings() if callable(result.timings) else result.timings
    result = dataclasses.replace(result, timings=timings)
    rec = probe_record(ctx, task, slot, metrics, intervals, result, decls)
    if dist_utils.is_main():
        write_record(slot.path, rec)
    dist_utils.barrier()
    return rec


def few_images_warning(intervals: dict, task: str) -> str:
    """The warning of a record whose interval rests on fewer than :data:`MIN_INTERVAL_IMAGES` test
    images ("" otherwise)."""
    n = (intervals or {}).get("n")
    if n is None or n >= MIN_INTERVAL_IMAGES:
        return ""
    return (
        f"only {n} {task} test image(s): an interval over fewer than {MIN_INTERVAL_IMAGES} test images "
        "does not mean anything (the bootstrap can only resample those few values); read the numbers as a "
        "smoke test, not a measurement"
    )


def write_mean(path: Path, records: list[dict]) -> Path:
    """Mean and (population) std over seeds of every metric, as one aggregated record.

    Its ``intervals``: when the seeds agree on every interval metric (the linear probe trains
    nothing, so its seeds are identical), the first seed's bootstrap interval, with its side file
    (``side_file``: the first seed's ``.bootstrap.npz``, in the same folder); otherwise the
    t-interval of the mean over seeds (``method: "seeds"``, see :func:`seed_intervals`).
    """
    views = record_views(records)
    keys = sorted(set.intersection(*(set(r.metrics) for r in views)))
    mean, std = {}, {}
    for k in keys:
        vals = [r.metric(k) for r in views if r.metric(k) is not None]
        if not vals:
            mean[k] = std[k] = None
            continue
        m = sum(vals) / len(vals)
        mean[k], std[k] = m, math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))
    r0 = views[0]
    seeds = [s for r in views for s in r.seeds]
    intervals = seed_intervals(views)
    few = few_images_warning({"n": r0.intervals.n if r0.intervals else None}, r0.task)
    if intervals and "side_file" in intervals and len(
        {r.intervals.bootstrap_sha256 if r.intervals else None for r in views}
    ) != 1:  # equal values but other resampled values: no single side file stands for the mean
        intervals = {k: v for k, v in intervals.items() if k not in ("side_file", "bootstrap_sha256")}
    rec = make_record(
        model=r0.model.as_dict(),
        task=r0.task,
        dataset=r0.dataset.as_dict(),
        protocol=r0.protocol.as_dict(),
        metrics=mean,
        metrics_std=std,
        intervals=intervals,
        config={**r0.config, "seed": seeds},
        conventions=r0.conventions,
        seeds=seeds,
        timings={k: sum(r.timings.get(k, 0.0) for r in views) for k in r0.timings},
        device=r0.device_type,
        notes=f"mean and std over seeds {seeds}" + (f"; WARNING: {few}" if few else ""),
        metric_decls=r0.metric_decls,
    )
    if dist_utils.is_main():
        write_record(path, rec)
    return path

