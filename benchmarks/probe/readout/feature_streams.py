"""What the probe's passes read features from: the frozen backbone's stream, or a reference row's.

A feature stream is called with a scene batch (and the task, for the reference rows, whose features
are made from that task's targets) and returns the batch's
:class:`~benchmarks.probe.features.store.FeatureSet`. ``shared`` says whether one call serves every
task of a scene group (the backbone's features) or each task needs its own (the ground-truth oracle
and the feature-free floor). The passes that consume them: :mod:`benchmarks.probe.readout.stream`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchmarks.probe.features.reference import floor_features, oracle_features
from benchmarks.probe.features.store import FeatureSet

if TYPE_CHECKING:
    from benchmarks.probe.data.batching import SceneBatch
    from benchmarks.probe.features.store import FeatureStore
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.tasks.base import ProbeTask


class BackboneStream:
    """Features of a scene batch from the frozen backbone: one stream shared by the group's tasks.

    Args:
        store: the :class:`~benchmarks.probe.features.store.FeatureStore` (``keep_in_memory=False``).
        input_size: (H, W) of the images.
        device: where the backbone runs (only the batch's images and activations live there).
    """

    shared = True

    def __init__(self, store: FeatureStore, input_size: Sequence[int], device: str = "cpu"):
        self.store, self.input_size, self.device = store, tuple(input_size), device

    def __call__(self, batch: SceneBatch, task: ProbeTask | None = None) -> FeatureSet:
        # the backbone runs on the device; its features come back to the host, where every sum is kept
        # in float64 (fast float64 is not assumed of the device)
        f, c = self.store.features(batch.images.to(self.device), ids=batch.ids)
        return self.store.feature_set(f, c, self.input_size)


class ReferenceStream:
    """The oracle's or the floor's features, one stream per task (they are made from its targets)."""

    shared = False

    def __init__(self, kind: str, protocol: ProbeProtocol):
        self.kind, self.protocol = kind, protocol

    def __call__(self, batch: SceneBatch, task: ProbeTask) -> FeatureSet:
        tgt = batch.targets[task.name]
        if self.kind == "floor":
            return floor_features(task, tgt, self.protocol)
        return oracle_features(task, tgt, self.protocol)


# what the passes read features from: the backbone's, or a reference row's
FeatureStream = BackboneStream | ReferenceStream
