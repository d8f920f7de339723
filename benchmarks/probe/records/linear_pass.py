"""The records of a read-out that trains nothing: per scene group one train pass (statistics, solve),
one test pass (evaluators), then a record per seed (the closed form is seed-independent)."""

from __future__ import annotations

import time
from functools import partial

from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.readout.feature_streams import BackboneStream, ReferenceStream
from benchmarks.probe.readout.stream import (
    StageTimes,
    fit_group,
    scene_groups,
    score_group,
)
from benchmarks.probe.records.context import ReadoutResult, RecordPlan, RunContext
from benchmarks.probe.records.write import write_evaluated_record


def closed_form_records(ctx: RunContext, task_objs: dict, train: SceneLoader, test: SceneLoader,
                        stream: BackboneStream | ReferenceStream, plan: RecordPlan) -> dict:
    """``{(task, seed): record}`` of the tasks of ``task_objs`` (each with a record left to write).

    Args:
        ctx: the run's context.
        task_objs: ``{name: ProbeTask}``.
        train, test: loaders over those tasks.
        stream: the run's :class:`~benchmarks.probe.readout.feature_streams.BackboneStream` or
            ``ReferenceStream``.
        plan: the run's records and the ones found done.
    """
    protocol = ctx.protocol
    out = {}
    for group, test_group in scene_groups(train, test):
        desc = f"{ctx.label} {'/'.join(group)}"
        fits, fit_times = fit_group(train, group, task_objs, stream, protocol, desc=f"{desc} train")
        evaluators, test_times = score_group(test, group, task_objs, stream, fits, protocol,
                                             desc=f"{desc} test")
        for t in group:
            task, ev = task_objs[t], evaluators[t]
            t0 = time.perf_counter()
            metrics = ev.compute()
            info = {"shortcut": fits[t].describe(), "final_loss": float("nan"), "resumed_from": 0}
            result = ReadoutResult(info, partial(_timings, fit_times, test_times, t0),
                                   test.num_samples(test_group), train.num_samples(group))
            for slot in plan.todo(t):
                out[(t, slot.seed)] = write_evaluated_record(ctx, task, slot, ev, metrics, result)
    return out


def _timings(fit: StageTimes, test: StageTimes, t_metrics: float) -> dict:
    """A streamed record's seconds per stage (the group's: its tasks share the scenes and features);
    the task's metrics and bootstrap took the seconds since ``t_metrics``."""
    metrics_s = time.perf_counter() - t_metrics
    return {
        "features_s": fit.forward_s + test.forward_s,
        "data_s": fit.data_s + test.data_s,
        "statistics_s": fit.stats_s,
        "shortcut_fit_s": fit.stats_s + fit.solve_s,
        "train_s": 0.0,
        "eval_s": test.test_s + metrics_s,
    }
