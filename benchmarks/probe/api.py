"""Python API of the probe: ``run_probe`` trains and evaluates decoders on a frozen backbone.

Example:
    >>> from benchmarks.probe.api import run_probe
    >>> paths = run_probe("pixels", ["seg"], data_dir, "out/", seeds=(0,), protocol="quick")  # doctest: +SKIP

Files under ``out_dir/<backbone>/<protocol_id>/<task>/``, with the task's own protocol id
(:meth:`~benchmarks.probe.protocol.ProbeProtocol.protocol_id`): ``seed<k>.json`` (one record per seed),
``seed<k>.bootstrap.npz`` (its resampled metric values, :mod:`benchmarks.probe.records.sidefile`),
``mean.json`` (mean and std over seeds) and ``seed<k>.ckpt.pt`` (resumable decoder state). Records of
different protocols live apart, so one never overwrites another. A record is a done marker, and a
decoder checkpoint is resumed, only for the same run: protocol id, data content, backbone config and
weights hash, task and seed (:mod:`benchmarks.probe.records.runkey`). A mismatched checkpoint is ignored with
a message; a record of another run at the path is never overwritten: the run stops before training.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from benchmarks.probe.backbones import (
    FLOOR,
    ORACLE,
    REFERENCE_BACKBONES,
    backbone_label,
    build_probe_backbone,
    resolve_backbone_cfg,
)
from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.path_checks import check_outputs_outside_data
from benchmarks.probe.data.source import DataSource, as_data_source
from benchmarks.probe.data.vocabularies import data_vocabularies
from benchmarks.probe.features.store import FeatureStore
from benchmarks.probe.protocol import ProbeProtocol, default_protocol, quick_protocol
from benchmarks.probe.readout.feature_streams import BackboneStream, ReferenceStream
from benchmarks.probe.records.context import RecordPlan, RunContext
from benchmarks.probe.records.linear_pass import closed_form_records
from benchmarks.probe.records.rank_agreement import check_ranks_agree, rank_identity
from benchmarks.probe.records.runkey import run_identity, run_mismatch, seed_list, weights_sha256
from benchmarks.probe.records.write import (
    MIN_INTERVAL_IMAGES,
    few_images_warning,
    write_mean,
)
from benchmarks.probe.tasks import build_task, probe_task_names
from benchmarks.probe.train.body_stream import body_records, body_tasks
from benchmarks.probe.train.optim import check_training_names
from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.output_lock import output_lock
from sapiens2.records.paths import public_weights
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView

__all__ = [
    "FLOOR", "ORACLE", "MIN_INTERVAL_IMAGES", "RecordConflictError", "RunOptions", "run_probe", "seed_list",
]

# what older callers import from here
_few_images_warning, _write_mean = few_images_warning, write_mean


class RecordConflictError(BenchError, ValueError):
    """The output path holds a record of another run (other data, weights, ...): it is not overwritten."""


# the protocols ``run_probe`` takes by name
NAMED_PROTOCOLS = {"default": default_protocol, "quick": quick_protocol}


def _protocol(protocol: ProbeProtocol | dict | str | None) -> ProbeProtocol:
    """The protocol ``run_probe`` was given: itself, from its dict, by name, or the default for None.

    Raises:
        UnknownNameError: a name that is not ``default`` or ``quick``.
        TypeError: anything else (names ``protocol`` and what was given).
    """
    if protocol is None:
        return default_protocol()
    if isinstance(protocol, str):
        if protocol not in NAMED_PROTOCOLS:
            raise UnknownNameError("run_probe protocol name", protocol, NAMED_PROTOCOLS)
        return NAMED_PROTOCOLS[protocol]()
    if isinstance(protocol, dict):
        return ProbeProtocol.from_dict(protocol)
    if not isinstance(protocol, ProbeProtocol):
        raise TypeError("run_probe protocol: expected a ProbeProtocol, its dict, 'default', 'quick' or None, "
                        f"got {type(protocol).__name__}")
    return protocol


def _task_list(tasks: str | Sequence[str]) -> list[str]:
    tasks = [t.strip() for t in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
    known = probe_task_names()
    if not tasks:
        raise ValueError(f"--tasks: no task given; expected some of {', '.join(known)}")
    for t in tasks:
        if t not in known:
            raise UnknownNameError("probe task", t, known)
    return tasks


def _spec_identity(cfg: dict) -> dict:
    """The backbone config that defines it, without where its weights were read from (hashed apart)."""
    return {k: v for k, v in cfg.items() if k not in ("name", "checkpoint", "pretrained")}


def _done_record(path: Path, identity: dict) -> dict | None:
    """The record at ``path`` if it was made by this very run; None if there is none (or it is unreadable).

    Raises:
        RecordConflictError: the path holds a readable record of another run.
    """
    if not path.is_file():
        return None
    try:
        rec = read_record(path)
    except ValueError as e:
        if dist_utils.is_main():
            print(f"probe: {path} is not a readable record ({e}); computing it again", file=sys.stderr)
        return None
    why = run_mismatch(RecordView.of(rec).config.get("run"), identity)
    if why is not None:
        raise RecordConflictError(
            f"{path} holds a record of another run: {why}. It is not overwritten: pass another --out, "
            "or delete that file to replace it"
        )
    return rec


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_probe` runs; none of it changes a number of the records.

    Attributes:
        device: ``cpu`` or ``cuda`` (only a batch of images and features lives on it).
        workers: data-loader worker processes (0: read in this process).
        batch_size: scenes per streamed batch (the sums do not depend on it; memory grows with it).
        sample_cache: a folder keeping the prepared samples on disk
            (:mod:`~benchmarks.probe.data.sample_cache`, keyed by data, tasks, protocol and reader code), so
            that other backbones probed on the same split read them back instead of decoding every file
            again (the main job's backbones share one); None: none kept.
        cache_dir: on-disk feature cache (None: none kept; a trained body's train features then go to
            the run's scratch folder ``out_dir/<backbone>/.scratch``, removed when the run ends).
    """

    device: str = "cpu"
    workers: int = 0
    batch_size: int = 8
    sample_cache: str | os.PathLike | None = None
    cache_dir: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 0:
            raise ValueError(f"--workers: expected a number of processes >= 0, got {self.workers!r}")
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise ValueError(f"batch_size: expected a number of scenes >= 1, got {self.batch_size!r}")


def run_probe(
    backbone: str | dict,
    tasks: str | Sequence[str],
    data_dir: str | os.PathLike | DataSource,
    out_dir: str | os.PathLike,
    seeds: int | str | Sequence[int] = (0,),
    protocol: ProbeProtocol | dict | Literal["default", "quick"] | None = None,
    *,
    checkpoint: str | os.PathLike | None = None,
    options: RunOptions | None = None,
) -> list[Path]:
    """Probe ``backbone`` on ``tasks``; write one record per (task, seed) plus mean +- std per task.

    Args:
        backbone: preset name (``sapiens2_0.1b``, ``dinov2_small``, ``pixels``, ...), registered
            ``PROBE_BACKBONES`` type, ``package.module:ClassName``, config dict, ``"gt-oracle"``
            (features = ground truth) or ``"floor"`` (no features: the read-out's per-pixel train prior).
        tasks: task names (registered probe tasks: ``pose, seg, normal, pointmap, albedo``) or a comma string.
        data_dir: dataset folder in the reader formats (or a
            :class:`~benchmarks.probe.data.source.MemoryData`).
        out_dir: output folder.
        seeds: decoder seeds.
        protocol: a :class:`ProbeProtocol`, its dict, or a name: ``"default"`` (the same as None:
            :func:`~benchmarks.probe.protocol.default_protocol`) or ``"quick"`` (the tiny one for tests,
            :func:`~benchmarks.probe.protocol.quick_protocol`).
        checkpoint: backbone weights (file or folder), checked against the arch before training.
        options: device, loader workers and batch, sample and feature caches (:class:`RunOptions`).

    Returns:
        Paths of the record files written or found complete (per seed, then the mean), rank 0 only
        (other ranks return the same list without writing).

    Raises:
        UnknownNameError: a protocol name other than ``default`` / ``quick`` (TypeError: a protocol of
            another type), before anything is read.
        RecordConflictError: a record path holds a record of another run (checked before training).
        OutputBusyError: another probe is writing into the same record folder (its lock is held).
    """
    t_start = time.perf_counter()
    options = options or RunOptions()
    tasks = _task_list(tasks)
    seeds = seed_list(seeds)
    protocol = _protocol(protocol)
    check_training_names(protocol)
    reference = backbone if isinstance(backbone, str) and backbone in REFERENCE_BACKBONES else None
    cfg = None if reference else resolve_backbone_cfg(backbone)  # a bad name fails here
    label = reference or backbone_label(backbone)
    source = as_data_source(data_dir)
    outputs = {"--out": out_dir, "--sample-cache": options.sample_cache,
               "--feature-cache": options.cache_dir}
    check_outputs_outside_data(source, (protocol.train_split, protocol.test_split), outputs)
    # the data's keypoint / label sets size the tasks and enter their protocol ids
    protocol, vocabs = data_vocabularies(protocol, tasks, source)
    # the task's protocol id: out/<backbone>/<its id>/<task>/
    out = Path(out_dir) / label.replace(os.sep, "_").replace(":", "_")
    folder = {t: out / protocol.protocol_id(t) / t for t in tasks}
    # one lock per backbone folder (every task's records of the backbone live below it): a second
    # probe of this backbone into this --out stops here, whatever its tasks
    with output_lock(out, f"probe {label}"):
        # a trained body's train split is spilled here (under the lock: no other run writes it); a
        # crashed run's leftovers are removed first
        scratch = out / ".scratch"
        if dist_utils.is_main():
            shutil.rmtree(scratch, ignore_errors=True)
        dist_utils.barrier()
        try:
            run = _Run(label, protocol, source, options, cfg, reference, checkpoint, scratch)
            return _probe(run, tasks, seeds, folder, vocabs, t_start)
        finally:
            dist_utils.barrier()
            if dist_utils.is_main():
                shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class _Run:
    """What one ``run_probe`` call probes with: the backbone (or reference row), data and folders."""

    label: str
    protocol: ProbeProtocol
    source: DataSource
    options: RunOptions
    cfg: dict | None  # the backbone's config (None for a reference row)
    reference: str | None  # "gt-oracle" / "floor", or None
    checkpoint: str | os.PathLike | None = None
    scratch: Path | None = None  # a trained body's train split is spilled below it


def _check_readouts(task_objs: dict) -> None:
    """Every task has a read-out: no read-out predicts global (pooled) outputs.

    Raises:
        ValueError: a task declares ``global_channels``.
    """
    for name, task in task_objs.items():
        if task.global_channels:
            raise ValueError(f"probe task {name!r}: global_channels={task.global_channels}, but no read-out "
                             "predicts global outputs (predict them as maps)")


def _backbone(run: _Run, with_body: bool) -> tuple[FeatureStore | None, dict, dict]:
    """(feature store or None, the records' backbone description, the run identity's backbone part)."""
    protocol, device = run.protocol, run.options.device
    if run.cfg is None:
        kind = "GroundTruthOracle" if run.reference == ORACLE else "FeatureFreeFloor"
        desc = {"type": kind, "params": 0, "weights": "none", "cls_used": False}
        return None, desc, {"spec": run.reference}
    probe_h, probe_w = protocol.input_size
    bb = build_probe_backbone(run.cfg, checkpoint=run.checkpoint, img_size=(probe_h, probe_w)).to(device)
    layers = protocol.tapped_layers(bb.num_layers)
    # feature shapes are validated on one image before anything is trained
    bb.extract(torch.zeros(1, 3, probe_h, probe_w, device=device), layers, protocol.padding)
    weights_hash = weights_sha256(bb)
    # a trained body reads its train features back from a disk cache (the user's, else the scratch folder)
    store = FeatureStore(bb, layers, protocol,
                         cache_dir=run.options.cache_dir or (run.scratch / "features" if with_body else None),
                         weights_hash=weights_hash, keep_in_memory=False)
    desc = {**bb.describe(), "layers": layers, "cls_used": bool(bb.has_cls and protocol.cls_concat)}
    # records name the weights by file name (or relative to $SAPIENS2_RECORD_ROOT) and hash, never by the
    # author's absolute path
    desc.update(weights=public_weights(desc.get("weights")), weights_sha256=weights_hash)
    return store, desc, {"spec": _spec_identity(run.cfg), "weights_sha256": weights_hash}


def _probe(run: _Run, tasks: list[str], seeds: list[int], folder: dict[str, Path], vocabs: dict,
           t_start: float) -> list[Path]:
    """:func:`run_probe` after its argument checks, holding the lock of the backbone's record folder.

    Args:
        run: the backbone and data of the call.
        tasks, seeds: what to probe.
        folder: ``{task: record folder}``.
        vocabs: the data's keypoint / label sets by task.
        t_start: when the call began (for the summary line).
    """
    protocol, source = run.protocol, run.source
    # 1. every check that can fail before any training: data, backbone + checkpoint, feature shapes
    task_objs = {t: build_task(t, protocol) for t in tasks}
    for t, v in vocabs.items():
        task_objs[t].use_vocabulary(v)
    _check_readouts(task_objs)
    body = body_tasks(task_objs, protocol)
    linear = [t for t in tasks if t not in body]
    # scenes are read per batch; the loaders check the splits and their GT here
    loading = {"batch_size": run.options.batch_size, "num_workers": run.options.workers,
               "sample_cache": run.options.sample_cache}
    loaders = {split: SceneLoader(source, task_objs, split, protocol, limit=limit, **loading)
               for split, limit in ((protocol.train_split, protocol.max_train_samples),
                                    (protocol.test_split, protocol.max_test_samples))}
    data_ids = {name: {"train": source.content_hash(name, protocol.train_split),
                       "test": source.content_hash(name, protocol.test_split)} for name in tasks}
    store, bb_desc, bb_id = _backbone(run, bool(body))

    check_ranks_agree(rank_identity(tasks, seeds, data_ids, protocol, bb_id))  # DDP: same run on every rank
    # 2. done markers: a record counts only for this very run; one of another run stops us here
    runs = {
        name: [
            (seed, folder[name] / f"seed{seed}.json",
             run_identity(protocol.protocol_id(name), data_ids[name], bb_id, name, seed))
            for seed in seeds
        ]
        for name in tasks
    }
    done = {(name, seed): _done_record(path, ident)
            for name, slots in runs.items() for seed, path, ident in slots}
    plan = RecordPlan(runs, done)
    todo = [t for t in tasks if plan.todo(t)]

    ctx = RunContext(run.label, bb_desc, protocol, source, run.options.device, run.scratch)
    records: dict = {}
    stream = _stream(ctx, store, run.reference)
    if any(t in linear for t in todo):
        names = [t for t in linear if t in todo]
        train, test = _loaders_for(ctx, names, task_objs, loaders)
        records.update(closed_form_records(ctx, {t: task_objs[t] for t in names}, train, test, stream, plan))
    if any(t in body for t in todo):
        names = [t for t in body if t in todo]
        train, test = _loaders_for(ctx, names, task_objs, loaders)
        records.update(body_records(ctx, {t: task_objs[t] for t in names}, train, test, stream, store,
                                    _reference_kind(run.reference), plan))
    written: list[Path] = []
    for name in tasks:
        per_seed = [done[(name, seed)] or records[(name, seed)] for seed in seeds]
        written += [path for _, path, _ in runs[name]]
        if len(seeds) > 1:
            written.append(write_mean(folder[name] / "mean.json", per_seed))
    dist_utils.barrier()
    if dist_utils.is_main():
        ran = f"; backbone ran on {store.backbone_images} image(s) on rank 0" if store is not None else ""
        took = time.perf_counter() - t_start
        where = os.path.commonpath([str(p) for p in folder.values()])
        print(f"probe {run.label}: {len(written)} record(s) under {where} in {took:.1f}s{ran}")
    return written


def _loaders_for(ctx: RunContext, names: list[str], task_objs: dict,
                 loaders: dict[str, SceneLoader]) -> tuple[SceneLoader, SceneLoader]:
    """(train, test): the run's loaders, or loaders over ``names`` alone when they differ (so the scenes
    are read for the tasks left to do, grouped among themselves)."""
    splits = (ctx.protocol.train_split, ctx.protocol.test_split)
    if set(names) != set(loaders[splits[0]].tasks):
        loaders = {split: SceneLoader(ctx.source, {t: task_objs[t] for t in names}, split, ctx.protocol,
                                      batch_size=ld.batch_size, num_workers=ld.num_workers, limit=ld.limit,
                                      sample_cache=ld.sample_cache)
                   for split, ld in loaders.items()}
    return loaders[splits[0]], loaders[splits[1]]


def _reference_kind(reference: str | None) -> str | None:
    return None if reference is None else ("floor" if reference == FLOOR else "oracle")


def _stream(ctx: RunContext, store: FeatureStore | None,
            reference: str | None) -> BackboneStream | ReferenceStream:
    """The run's feature stream: the backbone's, or the reference row's (made from the targets)."""
    if reference is None:
        return BackboneStream(store, ctx.protocol.input_size, ctx.device)
    return ReferenceStream(_reference_kind(reference), ctx.protocol)
