"""The reference rows' features: the ground-truth oracle (the ceiling) and the feature-free floor.

Both are computed from a batch's targets rather than by a backbone, on the grid the probe's read-out
would see at the decoder's stage stride, so they are scored under the very protocol of every backbone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.probe.features import FeatureSet
from benchmarks.probe.tasks.base import masked_mean


def train_prior(task, train_targets: dict) -> torch.Tensor | None:
    """A masked task's per-pixel train prior (:func:`masked_mean` of its read-out targets), else None."""
    return masked_mean(task.linear_targets(train_targets)) if task.masked else None


def prior_from_sums(sums: torch.Tensor) -> torch.Tensor:
    """:func:`masked_mean` from the float64 sum over train images of ``[mask * t, mask]`` (K+1 x H x W)."""
    s = sums.double()
    return torch.where(s[-1:] > 0, s[:-1] / s[-1:].clamp_min(1e-12), torch.zeros_like(s[:-1]))


def oracle_features(task, tgt: dict, protocol, prior: torch.Tensor | None) -> FeatureSet:
    """GT-derived features, rearranged losslessly (space-to-depth) to the decoder's stage stride.

    A masked task's features also hold the GT mask times ``prior``, the train split's per-pixel prior
    (:func:`train_prior`), on the train and the test split alike.

    At that stride the protocol's pixel-shuffle decoder has no upsampling stage: its conv block and
    PixelShuffle head can reproduce the targets exactly, at the same output resolution as for every
    other backbone, so the oracle is scored under the very protocol of the real backbones.
    """
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


def floor_features(task, tgt: dict, protocol) -> FeatureSet:
    """The floor's features: one constant channel (0) on the oracle's grid, so the read-out has nothing
    to regress on and is exactly its per-pixel train prior, under the protocol of every backbone."""
    # only the oracle grid's shape is used: it is read off the batch's first sample
    first = {k: v[:1] for k, v in tgt.items()}
    prior = None
    if task.masked:
        lt = task.linear_targets(first)
        prior = torch.zeros(lt.shape[1] - 1, *lt.shape[-2:])
    oracle = oracle_features(task, first, protocol, prior)
    rows = len(next(iter(tgt.values())))
    feats = torch.zeros(rows, 1, *oracle.feats.shape[-2:])
    return FeatureSet(feats.to(oracle.feats.device), None, oracle.patch_size, oracle.valid_frac,
                      oracle.image_size)
