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

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.probe.backbones import (
    FLOOR,
    ORACLE,
    REFERENCE_BACKBONES,
    backbone_label,
    build_probe_backbone,
    resolve_backbone_cfg,
)
from benchmarks.probe.data import as_data_source, load_task_split, sample_indices, stack_images
from benchmarks.probe.evaluate import evaluate_decoder
from benchmarks.probe.features import FeatureSet, FeatureStore
from benchmarks.probe.headline import seed_intervals
from benchmarks.probe.optim import check_training_names
from benchmarks.probe.protocol import ProbeProtocol, default_protocol, quick_protocol
from benchmarks.probe.runkey import run_identity, run_mismatch, seed_list, weights_sha256
from benchmarks.probe.sidefile import side_path
from benchmarks.probe.tasks import build_task, probe_task_names
from benchmarks.probe.tasks.base import masked_mean
from benchmarks.probe.train import fit_task_shortcut, train_decoder
from leaderboard.results import make_record, read_record, write_record
from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.output_lock import output_lock
from sapiens2.records.view import RecordView, record_views

__all__ = ["FLOOR", "ORACLE", "MIN_INTERVAL_IMAGES", "RecordConflictError", "run_probe", "seed_list"]

# Below this many test images a record's bootstrap interval is flagged as meaningless: a percentile
# bootstrap over so few images badly under-covers (it can only resample the handful of values seen).
MIN_INTERVAL_IMAGES = 30


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
        cache_dir: on-disk feature cache (None: memory only).
        device: ``cpu`` or ``cuda``.

    Returns:
        Paths of the record files written or found complete (per seed, then the mean), rank 0 only
        (other ranks return the same list without writing).

    Raises:
        RecordConflictError: a record path holds a record of another run (checked before training).
        OutputBusyError: another probe is writing into the same record folder (its lock is held).
    """
    t_start = time.perf_counter()
    tasks = _task_list(tasks)
    seeds = seed_list(seeds)
    protocol = _protocol(protocol, quick)
    check_training_names(protocol)
    reference = backbone if isinstance(backbone, str) and backbone in REFERENCE_BACKBONES else None
    cfg = None if reference else resolve_backbone_cfg(backbone)  # a bad name fails here
    label = reference or backbone_label(backbone)
    source = as_data_source(data_dir)
    # the data's keypoint / label sets size the tasks and enter their protocol ids
    protocol, vocabs = _data_vocabularies(protocol, tasks, source)
    # the task's protocol id: out/<backbone>/<its id>/<task>/
    out = Path(out_dir) / label.replace(os.sep, "_").replace(":", "_")
    folder = {t: out / protocol.protocol_id(t) / t for t in tasks}
    # one lock per backbone folder (every task's records of the backbone live below it): a second
    # probe of this backbone into this --out stops here, whatever its tasks
    with output_lock(out, f"probe {label}"):
        return _probe(tasks, seeds, protocol, cfg, reference, label, folder, source, checkpoint, cache_dir,
                      device, t_start, vocabs)


def _probe(tasks, seeds, protocol, cfg, reference, label, folder, source, checkpoint, cache_dir, device,
           t_start, vocabs=None):
    """:func:`run_probe` after its argument checks, holding the lock of the backbone's record folder."""
    # 1. every check that can fail before any training: data, backbone + checkpoint, feature shapes
    task_objs = {t: build_task(t, protocol) for t in tasks}
    for t, v in (vocabs or {}).items():
        task_objs[t].use_vocabulary(v)
    splits, data_ids = {}, {}
    for name, task in task_objs.items():
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
        store = FeatureStore(bb, layers, protocol, cache_dir=cache_dir, weights_hash=weights_hash)
        bb_desc = {**bb.describe(), "layers": layers, "cls_used": bool(bb.has_cls and protocol.cls_concat)}
        bb_id = {"spec": _spec_identity(cfg), "weights_sha256": weights_hash}
    else:
        kind = "GroundTruthOracle" if reference == ORACLE else "FeatureFreeFloor"
        bb_desc = {"type": kind, "params": 0, "weights": "none", "cls_used": False}
        bb_id = {"spec": reference}

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

    ctx = _Context(label, bb_desc, protocol, source, device)
    written: list[Path] = []
    for name, task in task_objs.items():
        per_seed = [done[(name, seed)] for seed in seeds]
        if any(rec is None for rec in per_seed):
            run = _task_run(task, splits[name], store, protocol, device, reference)
            for i, (seed, path, ident) in enumerate(plan[name]):
                if per_seed[i] is None:
                    per_seed[i] = _train_eval_record(ctx, run, seed, path, ident)
        written += [path for _, path, _ in plan[name]]
        if len(seeds) > 1:
            written.append(_write_mean(folder[name] / "mean.json", per_seed))
    dist_utils.barrier()
    if dist_utils.is_main():
        ran = f"; backbone ran on {store.backbone_images} image(s) on rank 0" if store is not None else ""
        took = time.perf_counter() - t_start
        where = os.path.commonpath([str(p) for p in folder.values()])
        print(f"probe {label}: {len(written)} record(s) under {where} in {took:.1f}s{ran}")
    return written


def _task_run(task, split, store, protocol, device, reference=None) -> _TaskRun:
    """Targets and features of one task's train and test split (the oracle's: its GT; the floor's: 0)."""
    train, test = split
    t0 = time.perf_counter()
    tr_tgt = {k: v.to(device) for k, v in task.targets(train).items()}
    te_tgt = {k: v.to(device) for k, v in task.targets(test).items()}
    if store is not None:
        desc = f"{task.name} features"
        tr_feat = store.compute(stack_images(train, protocol.input_size, task.name).to(device), desc)
        te_feat = store.compute(stack_images(test, protocol.input_size, task.name).to(device), desc)
    else:
        ref = _floor_features if reference == FLOOR else _oracle_features
        tr_feat, te_feat = ref(task, tr_tgt, protocol), ref(task, te_tgt, protocol, train_tgt=tr_tgt)
    run = _TaskRun(task, tr_feat, tr_tgt, te_feat, te_tgt, sample_indices(test), len(train))
    run.features_s = time.perf_counter() - t0
    return run


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


def _oracle_features(task, tgt, protocol, train_tgt=None):
    """GT-derived features, rearranged losslessly (space-to-depth) to the decoder's stage stride.

    A masked task's features also hold the GT mask times the train prior (``train_tgt``'s
    :func:`~benchmarks.probe.tasks.base.masked_mean`; default: ``tgt``'s own, for the train split).

    At that stride the protocol's pixel-shuffle decoder has no upsampling stage: its conv block and
    PixelShuffle head can reproduce the targets exactly, at the same output resolution as for every
    other backbone, so the oracle is scored under the very protocol of the real backbones.
    """
    prior = masked_mean(task.linear_targets(tgt if train_tgt is None else train_tgt)) if task.masked else None
    feats, cls, patch = task.oracle_features(tgt, prior)
    feats = feats.float()
    size = tuple(int(v) for v in feats.shape[-2:])
    valid = (1.0, 1.0)
    r = protocol.decoder_stage_stride // patch if patch < protocol.decoder_stage_stride else 1
    if r > 1:
        pad_h, pad_w = (-size[0]) % r, (-size[1]) % r
        feats = F.pixel_unshuffle(F.pad(feats, (0, pad_w, 0, pad_h)), r)
        valid = (size[0] / (size[0] + pad_h), size[1] / (size[1] + pad_w))
        patch *= r
    image_size = tuple(protocol.input_size) if task.crops else size
    return FeatureSet(feats, None if cls is None else cls.float(), patch, valid, image_size)


def _floor_features(task, tgt, protocol, train_tgt=None):
    """The floor's features: one constant channel (0) on the oracle's grid, so the read-out has nothing
    to regress on and is exactly its per-pixel train prior, under the protocol of every backbone."""
    oracle = _oracle_features(task, tgt, protocol)
    feats = torch.zeros(oracle.feats.shape[0], 1, *oracle.feats.shape[-2:])
    return FeatureSet(feats.to(oracle.feats.device), None, oracle.patch_size, oracle.valid_frac,
                      oracle.image_size)


def _train_eval_record(ctx: _Context, run: _TaskRun, seed: int, path: Path, identity: dict) -> dict:
    task, protocol, label, bb_desc, source = run.task, ctx.protocol, ctx.label, ctx.backbone, ctx.source
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
    pid = protocol.protocol_id(task.name)
    vocabulary = task.vocabulary()
    notes = (f"decoder trained from iteration {info['resumed_from']}; "
             f"final train loss {info['final_loss']:.5g}")
    few = _few_images_warning(intervals, task.name)
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
            "num_samples": int(run.test_feat.feats.shape[0]),
            **({"vocabulary": vocabulary} if vocabulary else {}),
        },
        protocol={
            "kind": "probe",
            "protocol_id": pid,
            "description": (
                "frozen backbone + closed-form linear probe"
                if protocol.task(task.name).decoder == "linear"
                else "frozen backbone + linear probe + trained pixel-shuffle body"
            )
            + " (benchmarks.probe.protocol.ProbeProtocol)",
        },
        metrics=metrics,
        intervals=intervals,
        config={
            "protocol": protocol.task_protocol(task.name),
            "backbone": bb_desc,
            "task": task.name,
            **({"vocabulary": vocabulary} if vocabulary else {}),
            "seed": seed,
            "num_train_samples": run.num_train,
            "shortcut": info["shortcut"],
            "run": identity,
        },
        seeds=[seed],
        timings={
            "features_s": run.features_s,
            "shortcut_fit_s": run.shortcut_s,
            "train_s": info["train_s"],
            "eval_s": eval_s,
        },
        device=ctx.device,
        notes=notes,
    )
    if dist_utils.is_main():
        write_record(path, rec)
    dist_utils.barrier()
    return rec


def _few_images_warning(intervals: dict, task: str) -> str:
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


def _write_mean(path: Path, records: list[dict]) -> Path:
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
    few = _few_images_warning({"n": r0.intervals.n if r0.intervals else None}, r0.task)
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
    )
    if dist_utils.is_main():
        write_record(path, rec)
    return path

