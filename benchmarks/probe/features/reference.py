"""The reference rows' features: the ground-truth oracle (the ceiling) and the feature-free floor.

Both are computed from a batch's targets rather than by a backbone, on the grid the probe's read-out
would see at the decoder's stage stride, so they are scored under the very protocol of every backbone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from benchmarks.probe.features.store import FeatureSet

if TYPE_CHECKING:
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.tasks.base import ProbeTask


def oracle_features(task: ProbeTask, tgt: dict, protocol: ProbeProtocol) -> FeatureSet:
    """GT-derived features, rearranged losslessly (space-to-depth) to the decoder's stage stride.

    They are the task's read-out targets (a masked task's ``[mask * t, mask]``), which the closed-form
    read-out maps to its predictions exactly: plain ground truth, nothing a backbone could not hold.

    At that stride the protocol's pixel-shuffle decoder has no upsampling stage: its conv block and
    PixelShuffle head can reproduce the targets exactly, at the same output resolution as for every
    other backbone, so the oracle is scored under the very protocol of the real backbones.
    """
    feats, cls, patch = task.oracle_features(tgt)
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


def floor_features(task: ProbeTask, tgt: dict, protocol: ProbeProtocol) -> FeatureSet:
    """The floor's features: one constant channel (0) on the oracle's grid, so the read-out has nothing
    to regress on and is exactly its per-pixel train prior, under the protocol of every backbone."""
    # only the oracle grid's shape is used: it is read off the batch's first sample
    oracle = oracle_features(task, {k: v[:1] for k, v in tgt.items()}, protocol)
    rows = len(next(iter(tgt.values())))
    feats = torch.zeros(rows, 1, *oracle.feats.shape[-2:])
    return FeatureSet(feats.to(oracle.feats.device), None, oracle.patch_size, oracle.valid_frac,
                      oracle.image_size)
