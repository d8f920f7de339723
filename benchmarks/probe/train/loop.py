"""Decoder training on cached features: the protocol's optimiser, schedule and loss; resumable, DDP-ready.

The global batch of iteration ``it`` is a deterministic function of ``(seed, it)``, so a resumed run
and a run on N ranks see exactly the batches of an uninterrupted single-process run; each rank
takes an equal slice of every global batch and DDP averages the gradients.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn
from tqdm.auto import tqdm

from benchmarks.probe.data.batching import batch_indices, select
from benchmarks.probe.readout.base import DecoderShape, get_readout
from benchmarks.probe.readout.decoders import ProbeDecoder
from benchmarks.probe.readout.shortcut import LinearShortcut, OnDemandOutputs, ReadoutGeometry, precompute
from benchmarks.probe.records.runkey import run_mismatch
from benchmarks.probe.train.optim import build_optimizer, lr_factor
from sapiens2 import distributed as dist_utils
from sapiens2.utils_io import atomic_write

if TYPE_CHECKING:
    from benchmarks.probe.features.store import FeatureSet
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.tasks.base import ProbeTask

__all__ = [
    "batch_indices",
    "DecoderCheckpoint",
    "build_decoder",
    "forward",
    "lr_factor",
    "select",
    "train_decoder",
]


@dataclass(frozen=True)
class DecoderCheckpoint:
    """A decoder's resumable state on disk.

    Attributes:
        path: the checkpoint file (None: none kept), written by rank 0 every ``every`` iterations.
        run: what identifies this training run (:func:`benchmarks.probe.records.runkey.run_identity`:
            protocol id, data, backbone and weights, task, seed); a checkpoint is resumed only when it
            was written for the same one (None: the task's ``{"protocol_id": ...}`` alone), otherwise
            it is ignored with a message.
        every: iterations between writes.
    """

    path: str | os.PathLike | None
    run: dict | None = None
    every: int = 50


def build_decoder(task: ProbeTask, features: FeatureSet, protocol: ProbeProtocol, seed: int,
                  shortcut: LinearShortcut | None = None) -> ProbeDecoder:
    """The task's decoder for ``features``, initialised from ``seed`` (same on every rank).

    With ``shortcut`` (a fitted :class:`~benchmarks.probe.readout.shortcut.LinearShortcut`) it is attached and
    the body's output layer starts at zero.
    """
    readout = get_readout(protocol.task(task.name).decoder)
    in_ch, _ = features.channels(protocol.cls_concat)
    shape = DecoderShape(in_ch, task.out_channels, features.patch_size,
                         ReadoutGeometry.of(task, features, protocol).stride)
    torch.manual_seed(seed)
    decoder = readout.build_decoder(shape, protocol, zero_init_output=shortcut is not None)
    decoder.shortcut = shortcut
    return decoder


def forward(decoder: ProbeDecoder, task: ProbeTask, features: FeatureSet, idx: torch.Tensor,
            protocol: ProbeProtocol,
            base: tuple[torch.Tensor, None] | OnDemandOutputs | None = None) -> tuple[torch.Tensor, None]:
    """Decoder outputs (maps, global) for the feature rows ``idx``.

    ``base``: precomputed shortcut outputs of all rows (maps, global), or an
    :class:`~benchmarks.probe.readout.shortcut.OnDemandOutputs` computing them from this batch (both from
    :func:`~benchmarks.probe.readout.shortcut.precompute`);
    without it the decoder computes its shortcut itself.
    """
    x, pooled = features.batch(idx, protocol.cls_concat)
    out_size = ReadoutGeometry.of(task, features, protocol).out_size
    if base is None:
        return decoder(x, out_size, features.valid_frac)
    maps = base(x, pooled)[0] if isinstance(base, OnDemandOutputs) else base[0][idx].float()
    return decoder(x, out_size, features.valid_frac, base=maps)


def _read_checkpoint(path: str | os.PathLike, device: str | torch.device) -> dict | None:
    """A decoder checkpoint, or None (with a message naming the file) when it is truncated or foreign."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # a truncated zip, a foreign pickle: the run is not blocked by it
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    else:
        if isinstance(state, dict) and {"decoder", "optimizer", "iteration"} <= set(state):
            return state
        why = f"a {type(state).__name__} without the decoder, optimizer and iteration entries"
    if dist_utils.is_main():
        print(f"probe: {path} is not a readable decoder checkpoint ({why}); it is ignored and rewritten",
              file=sys.stderr)
    return None


def train_decoder(
    task: ProbeTask,
    features: FeatureSet,
    targets: dict,
    protocol: ProbeProtocol,
    seed: int,
    *,
    shortcut: LinearShortcut | None = None,
    checkpoint: DecoderCheckpoint | None = None,
    desc: str = "train",
) -> tuple[ProbeDecoder, dict]:
    """Train a fresh decoder (or resume it from ``ckpt_path``) for ``protocol.iterations`` iterations.

    The body trains on what ``shortcut`` (the closed-form read-out the train pass fitted,
    :func:`~benchmarks.probe.readout.stream.fit_group`; seed-independent)
    leaves; a read-out that trains nothing (``"linear"``) is the shortcut alone (no iterations).

    Args:
        task: the :class:`~benchmarks.probe.tasks.ProbeTask`.
        features: train :class:`~benchmarks.probe.features.store.FeatureSet`.
        targets: the task's train targets (first dim = sample).
        protocol: the protocol.
        seed: decoder initialisation and batch-order seed.
        shortcut: the read-out fitted on these features (None only under ``shortcut="none"``).
        checkpoint: where the resumable decoder state goes and which run it belongs to (None: none
            kept).
        desc: progress-bar label.

    Returns:
        (decoder in eval mode, {"train_s", "final_loss", "resumed_from", "shortcut"}).
    """
    world, rank = dist_utils.get_world_size(), dist_utils.get_rank()
    if protocol.batch_size % world:
        raise ValueError(f"global batch size {protocol.batch_size} is not divisible by {world} processes")
    t0 = time.perf_counter()
    if shortcut is None and protocol.shortcut == "ridge":
        raise ValueError(f"{task.name} decoder: the protocol's shortcut is 'ridge' but no fitted read-out "
                         "was given (fit it with benchmarks.probe.readout.stream.fit_group)")
    info = {"shortcut": None if shortcut is None else shortcut.describe()}
    decoder = build_decoder(task, features, protocol, seed, shortcut).to(features.feats.device)
    if decoder.body is None:
        decoder.eval()
        return decoder, {
            **info,
            "train_s": time.perf_counter() - t0,
            "final_loss": float("nan"),
            "resumed_from": 0,
        }
    base = None if shortcut is None else precompute(shortcut, task, features, protocol)
    opt = build_optimizer(decoder.parameters(), protocol)
    ckpt = checkpoint or DecoderCheckpoint(None)
    ckpt_path, ckpt_every = ckpt.path, ckpt.every
    run = dict(ckpt.run) if ckpt.run is not None else {"protocol_id": protocol.protocol_id(task.name)}
    start = 0
    loss_val = float("nan")
    if ckpt_path is not None and Path(ckpt_path).is_file():
        state = _read_checkpoint(ckpt_path, features.feats.device)
        # a checkpoint of another run (protocol, data, weights, task or seed) is stale: start afresh
        why = "not a readable decoder checkpoint" if state is None else run_mismatch(state.get("run"), run)
        if why is None:
            decoder.load_state_dict(state["decoder"])
            opt.load_state_dict(state["optimizer"])
            start = int(state["iteration"])
            loss_val = float(state.get("loss", float("nan")))  # the notes' final loss when nothing is left
        elif rank == 0:
            print(
                f"{desc}: ignoring the decoder checkpoint {ckpt_path}: {why}; training from iteration 0",
                file=sys.stderr,
            )
    model: nn.Module = decoder
    if world > 1:
        dev = features.feats.device
        model = nn.parallel.DistributedDataParallel(decoder, device_ids=[dev] if dev.type == "cuda" else None)
    decoder.train()
    n = features.feats.shape[0]
    bar = tqdm(
        range(start, protocol.iterations),
        desc=desc,
        unit="it",
        disable=rank != 0,
        leave=False,
        mininterval=1.0,
    )
    for it in bar:
        for group in opt.param_groups:
            group["lr"] = protocol.lr * lr_factor(it, protocol)
        idx = batch_indices(n, protocol.batch_size, seed, it)[rank::world]
        maps, glob = forward(model, task, features, idx, protocol, base)
        task.set_step(it)
        loss, terms = task.loss(maps, glob, select(targets, idx))
        if not torch.isfinite(loss):
            raise RuntimeError(f"{desc}: non-finite loss at iteration {it} ({terms})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if protocol.grad_clip:
            nn.utils.clip_grad_norm_(decoder.parameters(), protocol.grad_clip)
        opt.step()
        loss_val = float(loss.detach())
        if it % 10 == 0:
            bar.set_postfix(loss=f"{loss_val:.4f}", refresh=False)
        done = it + 1
        if ckpt_path is not None and rank == 0 and (done % ckpt_every == 0 or done == protocol.iterations):
            state = {
                "decoder": decoder.state_dict(),
                "optimizer": opt.state_dict(),
                "iteration": done,
                "protocol_id": protocol.protocol_id(task.name),
                "run": run,
                "loss": loss_val,
            }
            atomic_write(ckpt_path, lambda tmp, s=state: torch.save(s, tmp))
    bar.close()
    decoder.eval()
    return decoder, {
        **info,
        "train_s": time.perf_counter() - t0,
        "final_loss": loss_val,
        "resumed_from": start,
    }
