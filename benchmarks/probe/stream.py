"""Backbone features of a split, one batch at a time: the probe's feature stream.

:func:`feature_stream` turns a :class:`~benchmarks.probe.loader.SceneLoader` group into
:class:`FeatureBatch` objects: the scene batch and, per task of the group, a
:class:`~benchmarks.probe.features.FeatureSet` of just those B images (tapped layers concatenated,
``B x L*C x h x w``, and CLS ``B x L*C``), read from the store's disk cache or computed by the backbone.
The tasks of a group share one FeatureSet object (one forward per image); for the ground-truth oracle
each task's features are its own targets. Nothing is kept once a batch is consumed, unless the store
keeps features in memory (``FeatureStore(keep_in_memory=True)``, today's default).

Interface::

    store = FeatureStore(backbone, layers, protocol, cache_dir=..., keep_in_memory=False)
    for fb in feature_stream(loader, ("seg", "normal"), store, protocol):
        fs = fb.features["seg"]               # FeatureSet of fb.batch's B images
        x, pooled = fs.batch(torch.arange(len(fb)), protocol.cls_concat)
        tgt = fb.batch.targets["seg"]         # the task's targets of those images

``store=None`` streams the oracle's features (``oracle_tasks`` gives the task objects).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmarks.probe.features import FeatureSet
from benchmarks.probe.loader import SceneBatch


@dataclass
class FeatureBatch:
    """One scene batch and its features per task."""

    batch: SceneBatch
    features: dict[str, FeatureSet]

    def __len__(self) -> int:
        return int(self.batch.positions.numel())


def feature_stream(
    loader,
    group: tuple[str, ...],
    store,
    protocol,
    *,
    oracle_tasks: dict | None = None,
    rank: int = 0,
    world: int = 1,
    device: str | torch.device = "cpu",
    targets: bool = True,
):
    """Yield a :class:`FeatureBatch` per batch of ``loader``'s ``group`` (this rank's share).

    Args:
        loader: the :class:`~benchmarks.probe.loader.SceneLoader`.
        group: one of ``loader.groups``.
        store: a :class:`~benchmarks.probe.features.FeatureStore`, or None for the oracle.
        protocol: the protocol.
        oracle_tasks: ``{name: ProbeTask}`` of the group (the oracle only).
        rank, world: yield every ``world``-th batch from the ``rank``-th.
        device: where the images go for the forward (features come back on the CPU).
        targets: build the batches' targets (False: a pass over the features alone; the oracle,
            whose features are its targets, always builds them).
    """
    from benchmarks.probe.api import _oracle_features  # the oracle's features, as today's path makes them

    for b in loader.batches(group, rank=rank, world=world, targets=targets or store is None):
        if store is None:
            if oracle_tasks is None:
                raise ValueError("feature_stream: the oracle (store=None) needs oracle_tasks")
            feats = {t: _oracle_features(oracle_tasks[t], b.targets[t], protocol) for t in group}
        else:
            f, c = store.features(b.images.to(device), ids=b.ids)
            fs = store.feature_set(f, c, tuple(b.images.shape[-2:]))
            feats = {t: fs for t in group}
        yield FeatureBatch(b, feats)
