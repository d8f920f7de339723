"""Python API of the probe: ``run_probe`` trains and evaluates decoders on a frozen backbone.

Example:
    >>> from benchmarks.probe.api import run_probe
    >>> paths = run_probe("pixels", ["seg"], data_dir, "out/", seeds=(0,), quick=True)  # doctest: +SKIP

Files under ``out_dir/<backbone>/<protocol_id>/<task>/``, with the task's own protocol id
(:meth:`~benchmarks.probe.protocol.ProbeProtocol.protocol_id`): ``seed<k>.json`` (one record per seed),
``seed<k>.bootstrap.npz`` (its resampled metric values, :mod:`benchmarks.probe.sidefile`), ``mean.json``
(mean and std over seeds) and ``seed<k>.ckpt.pt`` (resumable decoder state). Records of
different protocols live apart, so one never overwrites another. A record is a done marker, and a
decoder checkpoint is resumed, only for the same run: protocol id, data content, backbone config and
weights hash, task and seed (:mod:`benchmarks.probe.runkey`). A mismatched checkpoint is ignored with
a message; a record of another run at the path is never overwritten: the run stops before training.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from benchmarks.probe.backbones import (
    FLOOR,
    ORACLE,
    REFERENCE_BACKBONES,
    backbone_label,
    build_probe_backbone,
    resolve_backbone_cfg,
)
from benchmarks.probe.body_stream import body_records, body_tasks
from benchmarks.probe.data import as_data_source, load_task_split, sample_indices, stack_images
from benchmarks.probe.evaluate import evaluate_decoder
from benchmarks.probe.features import FeatureStore
from benchmarks.probe.loader import SceneLoader
from benchmarks.probe.optim import check_training_names
from benchmarks.probe.path_checks import check_outputs_outside_data
from benchmarks.probe.probe_records import (
    MIN_INTERVAL_IMAGES,
    few_images_warning,
    probe_record,
    write_evaluated_record,
    write_mean,
)
from benchmarks.probe.protocol import ProbeProtocol, default_protocol, quick_protocol
from benchmarks.probe.rank_agreement import check_ranks_agree, rank_identity
from benchmarks.probe.reference import floor_features, oracle_features, train_prior
from benchmarks.probe.runkey import run_identity, run_mismatch, seed_list, weights_sha256
from benchmarks.probe.sidefile import side_path
from benchmarks.probe.stream import (
    BackboneStream,
    ReferenceStream,
    StageTimes,
    fit_group,
    scene_groups,
    score_group,
)
from benchmarks.probe.tasks import build_task, probe_task_names
from benchmarks.probe.train import fit_task_shortcut, train_decoder
from leaderboard.results import read_record, write_record
from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.output_lock import output_lock
from sapiens2.records.paths import public_weights
from sapiens2.records.view import RecordView

__all__ = ["FLOOR", "ORACLE", "MIN_INTERVAL_IMAGES", "RecordConflictError", "run_probe", "seed_list"]

# what older callers import from here
_few_images_warning, _write_mean = few_images_warning, write_mean


class RecordConflictError(BenchError, ValueError):
    """The output path holds a record of another run (other data, weights, ...): it is not overwritten."""


def _protocol(protocol, quick: bool) -> ProbeProtocol:
    if protocol is None:
        protocol = quick_protocol() if quick else default_protocol()
    elif isinstance(protocol, dict):
        protocol = ProbeProtocol.from_dict(protocol)
    return protocol


def _task_list(tasks) -> list[str]:
    tasks = [t.strip() for t in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
    known = probe_task_names()
    if not tasks:
        raise ValueError(f"--tasks: no task given; expected some of {', '.join(known)}")
    for t in tasks:
        if t not in known:
            raise UnknownNameError("probe task", t, known)
    return tasks


def _data_vocabularies(protocol: ProbeProtocol, tasks: list[str], source) -> tuple[ProbeProtocol, dict]:
    """The protocol with each task's vocabulary field set from the data, and the data's sets by task.

    A task's set is the one its train and test splits' readers name (they must agree); a set that is
    the task's default is left empty in the protocol (the ids of default-vocabulary runs never change).

    Raises:
        ValueError: the train and test splits name different sets, or the protocol names another set.
    """
    vocabs = {}
    for t in tasks:
        task = build_task(t, protocol)
        kind, field_name = task.vocabulary_kind, protocol.task(t).VOCABULARY_FIELD
        if not kind or not field_name:
            continue
        splits = (protocol.train_split, protocol.test_split)
        found = [source.vocabulary(t, split, protocol) for split in splits]
        if found[0] is None and found[1] is None:
            continue
        ids = []
        for v in found:
            task.use_vocabulary(v)  # a protocol that names another set fails here
            ids.append(task.vocabulary()[kind])
        if ids[0] != ids[1]:
            raise ValueError(
                f"data {source.name}: the {t} {protocol.train_split!r} split's {kind} is {ids[0]!r} but the "
                f"{protocol.test_split!r} split's is {ids[1]!r}"
            )
        vocabs[t] = found[1] if found[1] is not None else found[0]
        named = "" if ids[1] == task.default_vocabulary else ids[1]
        if getattr(protocol.task(t), field_name) != named:
            protocol = protocol.replace(tasks={t: {field_name: named}})
    return protocol, vocabs


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


def run_probe(
    backbone: str | dict,
    tasks,
    data_dir,
    out_dir,
    seeds=(0,),
    protocol=None,
    checkpoint=None,
    quick: bool = False,
    cache_dir: str | os.PathLike | None = None,
    device: str = "cpu",
    workers: int = 0,
    streamed: bool = True,
    batch_size: int = 8,
    sample_cache: str | os.PathLike | None = None,
) -> list[Path]:
    """Probe ``backbone`` on ``tasks``; write one record per (task, seed) plus mean +- std per task.

    Args:
        backbone: preset name (``sapiens2_0.1b``, ``dinov2_small``, ``pixels``, ...), registered
            ``PROBE_BACKBONES`` type, ``package.module:ClassName``, config dict, ``"gt-oracle"``
            (features = ground truth) or ``"floor"`` (no features: the read-out's per-pixel train prior).
        tasks: task names (registered probe tasks: ``pose, seg, normal, pointmap, albedo``) or a comma string.
        data_dir: dataset folder in the reader formats (or a :class:`~benchmarks.probe.data.MemoryData`).
        out_dir: output folder.
        seeds: decoder seeds.
        protocol: a :class:`ProbeProtocol`, its dict, or None for the default (``quick`` picks the tiny one).
        checkpoint: backbone weights (file or folder), checked against the arch before training.
        quick: use :func:`~benchmarks.probe.protocol.quick_protocol` when ``protocol`` is None.
        cache_dir: on-disk feature cache (None: none kept; a trained body's train features then go to
            the run's scratch folder ``out_dir/<backbone>/.scratch``, removed when the run ends).
        device: ``cpu`` or ``cuda`` (only a batch of images and features lives on it).
        workers: data-loader worker processes of the streamed read-out (0: read in this process).
        batch_size: scenes per streamed batch (the sums do not depend on it; memory grows with it).
        sample_cache: a folder keeping the streamed read-out's prepared samples on disk
            (:mod:`~benchmarks.probe.sample_cache`, keyed by data, tasks, protocol and reader code), so
            that other backbones probed on the same split read them back instead of decoding every file
            again (the main job's backbones share one); None: none kept. The records do not depend on it.
        streamed: False runs the linear read-out and the trained body on whole splits in memory (the
            reference the streamed spine is tested and benchmarked against; same numbers to float
            tolerance).

    Returns:
        Paths of the record files written or found complete (per seed, then the mean), rank 0 only
        (other ranks return the same list without writing).

    Raises:
        RecordConflictError: a record path holds a record of another run (checked before training).
        OutputBusyError: another probe is writing into the same record folder (its lock is held).
    """
    t_start = time.perf_counter()
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
        raise ValueError(f"--workers: expected a number of processes >= 0, got {workers!r}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size: expected a number of scenes >= 1, got {batch_size!r}")
    tasks = _task_list(tasks)
    seeds = seed_list(seeds)
    protocol = _protocol(protocol, quick)
    check_training_names(protocol)
    reference = backbone if isinstance(backbone, str) and backbone in REFERENCE_BACKBONES else None
    cfg = None if reference else resolve_backbone_cfg(backbone)  # a bad name fails here
    label = reference or backbone_label(backbone)
    source = as_data_source(data_dir)
    outputs = {"--out": out_dir, "--sample-cache": sample_cache, "--feature-cache": cache_dir}
    check_outputs_outside_data(source, (protocol.train_split, protocol.test_split), outputs)
    # the data's keypoint / label sets size the tasks and enter their protocol ids
    protocol, vocabs = _data_vocabularies(protocol, tasks, source)
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
            return _probe(tasks, seeds, protocol, cfg, reference, label, folder, source, checkpoint,
                          cache_dir, device, t_start, vocabs, workers, streamed, batch_size, scratch,
                          sample_cache)
        finally:
            dist_utils.barrier()
            if dist_utils.is_main():
                shutil.rmtree(scratch, ignore_errors=True)


def _streams(task_objs: dict, protocol) -> list[str]:
    """The tasks the streamed spine probes: the closed-form linear read-out without a global branch.

    The trained pixel-shuffle body (and a read-out with a global branch) trains on the whole split's
    features in memory instead (:func:`_task_run`).
    """
    return [t for t, task in task_objs.items()
            if protocol.task(t).decoder == "linear" and not task.global_channels]


def _probe(tasks, seeds, protocol, cfg, reference, label, folder, source, checkpoint, cache_dir, device,
           t_start, vocabs=None, workers=0, streamed_ok=True, batch_size=8, scratch=None, sample_cache=None):
    """:func:`run_probe` after its argument checks, holding the lock of the backbone's record folder."""
    # 1. every check that can fail before any training: data, backbone + checkpoint, feature shapes
    task_objs = {t: build_task(t, protocol) for t in tasks}
    for t, v in (vocabs or {}).items():
        task_objs[t].use_vocabulary(v)
    streamed = _streams(task_objs, protocol) if streamed_ok else []
    body = body_tasks(task_objs, protocol) if streamed_ok and scratch is not None else []
    loaders = {}
    if streamed or body:  # scenes are read per batch; the loaders check the splits and their GT here
        loaders = {
            split: SceneLoader(source, {t: task_objs[t] for t in streamed + body}, split, protocol,
                               batch_size=batch_size, num_workers=workers, limit=limit,
                               sample_cache=sample_cache)
            for split, limit in ((protocol.train_split, protocol.max_train_samples),
                                 (protocol.test_split, protocol.max_test_samples))
        }
    splits, data_ids = {}, {}
    for name, task in task_objs.items():
        if name not in streamed and name not in body:
            train = load_task_split(source, task, protocol.train_split, protocol, protocol.max_train_samples)
            test = load_task_split(source, task, protocol.test_split, protocol, protocol.max_test_samples)
            splits[name] = (train, test)
        data_ids[name] = {
            "train": source.content_hash(name, protocol.train_split),
            "test": source.content_hash(name, protocol.test_split),
        }
    bb = store = None
    if cfg is not None:
        probe_h, probe_w = protocol.input_size
        bb = build_probe_backbone(cfg, checkpoint=checkpoint, img_size=(probe_h, probe_w)).to(device)
        layers = protocol.tapped_layers(bb.num_layers)
        # feature shapes are validated on one image before anything is trained
        bb.extract(torch.zeros(1, 3, probe_h, probe_w, device=device), layers, protocol.padding)
        weights_hash = weights_sha256(bb)
        # features are kept in RAM only for the in-memory path; a trained body on the streamed spine
        # reads its train features back from a disk cache (the user's, else the run's scratch folder)
        store = FeatureStore(bb, layers, protocol,
                             cache_dir=cache_dir or (scratch / "features" if body else None),
                             weights_hash=weights_hash, keep_in_memory=len(streamed) + len(body) < len(tasks))
        bb_desc = {**bb.describe(), "layers": layers, "cls_used": bool(bb.has_cls and protocol.cls_concat)}
        # records name the weights by file name (or relative to $SAPIENS2_RECORD_ROOT) and hash, never by
        # the author's absolute path
        bb_desc.update(weights=public_weights(bb_desc.get("weights")), weights_sha256=weights_hash)
        bb_id = {"spec": _spec_identity(cfg), "weights_sha256": weights_hash}
    else:
        kind = "GroundTruthOracle" if reference == ORACLE else "FeatureFreeFloor"
        bb_desc = {"type": kind, "params": 0, "weights": "none", "cls_used": False}
        bb_id = {"spec": reference}

    check_ranks_agree(rank_identity(tasks, seeds, data_ids, protocol, bb_id))  # DDP: same run on every rank
    # 2. done markers: a record counts only for this very run; one of another run stops us here
    plan = {
        name: [
            (seed, folder[name] / f"seed{seed}.json",
             run_identity(protocol.protocol_id(name), data_ids[name], bb_id, name, seed))
            for seed in seeds
        ]
        for name in tasks
    }
    done = {
        (name, seed): _done_record(path, ident) for name, runs in plan.items() for seed, path, ident in runs
    }
    todo = [t for t in tasks if any(done[(t, s)] is None for s in seeds)]

    ctx = _Context(label, bb_desc, protocol, source, device)
    records: dict = {}
    if any(t in streamed for t in todo):
        records.update(_streamed_records(ctx, [t for t in streamed if t in todo], task_objs, loaders, store,
                                         reference, plan, done))
    if any(t in body for t in todo):
        names = [t for t in body if t in todo]
        train, test = (_loaders_for(ctx, names, task_objs, loaders)[s]
                       for s in (protocol.train_split, protocol.test_split))
        records.update(body_records(ctx, {t: task_objs[t] for t in names}, train, test,
                                    _stream(ctx, store, reference), store, _reference_kind(reference),
                                    plan, done, scratch))
    for name in todo:
        if name in streamed or name in body:
            continue
        run = _task_run(task_objs[name], splits[name], store, protocol, device, reference)
        for seed, path, ident in plan[name]:
            if done[(name, seed)] is None:
                records[(name, seed)] = _train_eval_record(ctx, run, seed, path, ident)
    written: list[Path] = []
    for name in tasks:
        per_seed = [done[(name, seed)] or records[(name, seed)] for seed in seeds]
        written += [path for _, path, _ in plan[name]]
        if len(seeds) > 1:
            written.append(write_mean(folder[name] / "mean.json", per_seed))
    dist_utils.barrier()
    if dist_utils.is_main():
        ran = f"; backbone ran on {store.backbone_images} image(s) on rank 0" if store is not None else ""
        took = time.perf_counter() - t_start
        where = os.path.commonpath([str(p) for p in folder.values()])
        print(f"probe {label}: {len(written)} record(s) under {where} in {took:.1f}s{ran}")
    return written


def _streamed_records(ctx, todo, task_objs, loaders, store, reference, plan, done) -> dict:
    """The records of the streamed tasks ``todo``: per scene group one train pass (statistics, solve)
    and one test pass (evaluators), then a record per seed (the read-out is seed-independent)."""
    protocol = ctx.protocol
    loaders = _loaders_for(ctx, todo, task_objs, loaders)
    train, test = loaders[protocol.train_split], loaders[protocol.test_split]
    stream = _stream(ctx, store, reference)
    out = {}
    for group, test_group in scene_groups(train, test):
        desc = f"{ctx.label} {'/'.join(group)}"
        fits, priors, fit_times = fit_group(train, group, task_objs, stream, protocol, desc=f"{desc} train")
        evaluators, test_times = score_group(test, group, task_objs, stream, fits, priors, protocol,
                                             desc=f"{desc} test")
        for t in group:
            task, ev = task_objs[t], evaluators[t]
            t0 = time.perf_counter()
            metrics = ev.compute()
            info = {"shortcut": fits[t].describe(), "final_loss": float("nan"), "resumed_from": 0}
            for seed, path, ident in plan[t]:
                if done[(t, seed)] is not None:
                    continue
                out[(t, seed)] = write_evaluated_record(
                    ctx, task, ev, metrics, seed, path, ident, info,
                    partial(_stream_timings, fit_times, test_times, t0),
                    test.num_samples(test_group), train.num_samples(group))
    return out


def _loaders_for(ctx, names, task_objs: dict, loaders: dict) -> dict:
    """The run's loaders, or loaders over ``names`` alone when they differ (so the scenes are read for
    the tasks left to do, grouped among themselves)."""
    if set(names) == set(loaders[ctx.protocol.train_split].tasks):
        return loaders
    return {split: SceneLoader(ctx.source, {t: task_objs[t] for t in names}, split, ctx.protocol,
                               batch_size=ld.batch_size, num_workers=ld.num_workers, limit=ld.limit,
                               sample_cache=ld.sample_cache)
            for split, ld in loaders.items()}


def _reference_kind(reference) -> str | None:
    return None if reference is None else ("floor" if reference == FLOOR else "oracle")


def _stream(ctx, store, reference):
    """The run's feature stream: the backbone's, or the reference row's (made from the targets)."""
    if reference is None:
        return BackboneStream(store, ctx.protocol.input_size, ctx.device)
    return ReferenceStream(_reference_kind(reference), ctx.protocol)


def _stream_timings(fit: StageTimes, test: StageTimes, t_metrics: float) -> dict:
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


def _task_run(task, split, store, protocol, device, reference=None) -> _TaskRun:
    """Targets and features of one task's train and test split, in memory (``streamed=False``, or a
    task with a global branch; the oracle's features: its GT; the floor's: 0)."""
    train, test = split
    t0 = time.perf_counter()
    tr_tgt = {k: v.to(device) for k, v in task.targets(train).items()}
    te_tgt = {k: v.to(device) for k, v in task.targets(test).items()}
    if store is not None:
        desc = f"{task.name} features"
        tr_feat = store.compute(stack_images(train, protocol.input_size, task.name).to(device), desc)
        te_feat = store.compute(stack_images(test, protocol.input_size, task.name).to(device), desc)
    elif reference == FLOOR:
        tr_feat, te_feat = floor_features(task, tr_tgt, protocol), floor_features(task, te_tgt, protocol)
    else:
        prior = train_prior(task, tr_tgt)
        tr_feat = oracle_features(task, tr_tgt, protocol, prior)
        te_feat = oracle_features(task, te_tgt, protocol, prior)
    run = _TaskRun(task, tr_feat, tr_tgt, te_feat, te_tgt, sample_indices(test), len(train))
    run.features_s = time.perf_counter() - t0
    return run


def _oracle_features(task, tgt, protocol, train_tgt=None):
    """The oracle's features of ``tgt`` with the prior of ``train_tgt`` (default: ``tgt``'s own)."""
    return oracle_features(task, tgt, protocol, train_prior(task, tgt if train_tgt is None else train_tgt))


def _floor_features(task, tgt, protocol, train_tgt=None):
    """The floor's features of ``tgt`` (:func:`~benchmarks.probe.reference.floor_features`)."""
    return floor_features(task, tgt, protocol)


@dataclass
class _Context:
    """What every record of one ``run_probe`` call shares."""

    label: str
    backbone: dict
    protocol: ProbeProtocol
    source: object
    device: str


@dataclass
class _TaskRun:
    """One task's train/test features and targets, and its shortcut (fitted once, for every seed)."""

    task: object
    train_feat: object
    train_tgt: dict
    test_feat: object
    test_tgt: dict
    test_idx: torch.Tensor
    num_train: int
    features_s: float = 0.0
    shortcut: object = None
    shortcut_s: float = 0.0

    def fitted_shortcut(self, protocol):
        """The task's closed-form shortcut (seed-independent), fitted on first use."""
        if self.shortcut is None and protocol.shortcut == "ridge":
            t0 = time.perf_counter()
            self.shortcut = fit_task_shortcut(self.task, self.train_feat, self.train_tgt, protocol)
            self.shortcut_s = time.perf_counter() - t0
        return self.shortcut


def _train_eval_record(ctx: _Context, run: _TaskRun, seed: int, path: Path, identity: dict) -> dict:
    """One record of the in-memory path: train (or resume) the decoder, evaluate, write the record."""
    task, protocol, label = run.task, ctx.protocol, ctx.label
    decoder, info = train_decoder(
        task,
        run.train_feat,
        run.train_tgt,
        protocol,
        seed,
        ckpt_path=path.with_suffix(".ckpt.pt"),
        desc=f"{label} {task.name} seed {seed}",
        shortcut=run.fitted_shortcut(protocol),
        run=identity,
    )
    metrics, eval_s, intervals = evaluate_decoder(
        task, decoder, run.test_feat, run.test_tgt, run.test_idx, protocol, side_path=side_path(path)
    )
    timings = {"features_s": run.features_s, "shortcut_fit_s": run.shortcut_s, "train_s": info["train_s"],
               "eval_s": eval_s}
    rec = probe_record(ctx, task, seed, identity, metrics, intervals, info, timings,
                       int(run.test_feat.feats.shape[0]), run.num_train)
    if dist_utils.is_main():
        write_record(path, rec)
    dist_utils.barrier()
    return rec
