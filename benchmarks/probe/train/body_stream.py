"""The trained body on the streamed spine: the train split spilled to disk, the test split streamed.

Per scene group: one train pass
(:func:`~benchmarks.probe.readout.stream.fit_group`: the closed-form shortcut's
sums, the backbone's features into the feature store's disk cache, the targets into a
:class:`~benchmarks.probe.train.spill.TrainSpill`), then per seed every task's decoder trains on rows read
back from disk (:func:`~benchmarks.probe.train.loop.train_decoder`, unchanged: resumable, DDP-ready) and
one test pass scores all of them (:func:`~benchmarks.probe.readout.stream.score_group`). What stays in memory
is a training batch, the decoders and the evaluators' per-image rows.
"""

from __future__ import annotations

import time
from functools import partial

from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.features.store import FeatureStore
from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.readout.base import get_readout
from benchmarks.probe.readout.feature_streams import BackboneStream, ReferenceStream
from benchmarks.probe.readout.stream import (
    DecoderReadout,
    StageTimes,
    fit_group,
    scene_groups,
    score_group,
)
from benchmarks.probe.records.context import ReadoutResult, RecordPlan, RunContext
from benchmarks.probe.records.write import write_evaluated_record
from benchmarks.probe.tasks import ProbeTask
from benchmarks.probe.train.loop import DecoderCheckpoint, train_decoder
from benchmarks.probe.train.spill import TrainSpill, spill_pass


def body_tasks(task_objs: dict[str, ProbeTask], protocol: ProbeProtocol) -> list[str]:
    """The tasks whose read-out trains something
    (:attr:`~benchmarks.probe.readout.base.ProbeReadout.trains`)."""
    return [t for t in task_objs if get_readout(protocol.task(t).decoder).trains]


def body_records(ctx: RunContext, task_objs: dict, train: SceneLoader, test: SceneLoader,
                 stream: BackboneStream | ReferenceStream,
                 store: FeatureStore | None, reference: str | None, plan: RecordPlan) -> dict:
    """The records of the trained-body tasks of ``task_objs`` (see the module docstring).

    Args:
        ctx: the run's context (label, protocol, device, scratch folder: the spilled targets go below it).
        task_objs: ``{name: ProbeTask}`` of the tasks with a record left to write.
        train, test: :class:`~benchmarks.probe.data.loader.SceneLoader` objects over those tasks.
        stream: the run's :class:`~benchmarks.probe.readout.feature_streams.BackboneStream` or
            ``ReferenceStream``.
        store: the backbone's feature store (with a disk cache), or None for a reference row.
        reference: None, or the reference row's kind (``"oracle"`` / ``"floor"``).
        plan: the run's records and the ones found done.
    """
    protocol, tasks = ctx.protocol, task_objs
    out = {}
    for group, test_group in scene_groups(train, test):
        desc = f"{ctx.label} {'/'.join(group)}"
        spill = TrainSpill(ctx.scratch / "-".join(group), group, hash_images=reference is None)
        if protocol.shortcut == "ridge":
            fits, fit_times = fit_group(train, group, tasks, stream, protocol, desc=f"{desc} train",
                                        on_batch=spill.add)
        else:
            fit_times = StageTimes()
            fit_times.forward_s = spill_pass(train, group, spill, stream, desc=f"{desc} features")
            fits = {t: None for t in group}
        spill.finish(train.num_samples(group))
        slots = {(t, slot.seed): slot for t in group for slot in plan.todo(t)}
        for seed in sorted({seed for _, seed in slots}):
            readouts, infos = {}, {}
            for t in group:
                slot = slots.get((t, seed))
                if slot is None:
                    continue
                if reference is None:
                    feats = spill.backbone_features(store, protocol.input_size, ctx.device)
                else:
                    feats = spill.reference_features(reference, tasks[t], protocol, ctx.device)
                decoder, infos[t] = train_decoder(
                    tasks[t], feats, spill.targets(t, ctx.device), protocol, seed, shortcut=fits[t],
                    checkpoint=DecoderCheckpoint(slot.path.with_suffix(".ckpt.pt"), slot.identity),
                    desc=f"{desc} {t} seed {seed}",
                )
                readouts[t] = DecoderReadout(decoder, protocol.cls_concat)
            if not readouts:
                continue
            evaluators, test_times = score_group(test, test_group, tasks, stream, readouts, protocol,
                                                 desc=f"{desc} test seed {seed}")
            for t, ev in evaluators.items():
                timings = partial(_timings, fit_times, test_times, infos[t]["train_s"], time.perf_counter())
                result = ReadoutResult(infos[t], timings, test.num_samples(test_group),
                                       train.num_samples(group))
                out[(t, seed)] = write_evaluated_record(ctx, tasks[t], slots[(t, seed)], ev, ev.compute(),
                                                        result)
    return out


def _timings(fit: StageTimes, test: StageTimes, train_s: float, t_eval: float) -> dict:
    """A trained-body record's seconds per stage (the train pass and the test pass are the group's)."""
    return {"features_s": fit.forward_s + test.forward_s, "data_s": fit.data_s + test.data_s,
            "shortcut_fit_s": fit.stats_s + fit.solve_s, "train_s": train_s,
            "eval_s": test.test_s + time.perf_counter() - t_eval}
