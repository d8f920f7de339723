"""The five probing tasks, one small module each (targets, loss, evaluator adapter, oracle features)."""

from __future__ import annotations

from benchmarks.probe.tasks.albedo import AlbedoTask
from benchmarks.probe.tasks.base import ProbeTask
from benchmarks.probe.tasks.normal import NormalTask
from benchmarks.probe.tasks.pointmap import PointmapTask
from benchmarks.probe.tasks.pose import PoseTask
from benchmarks.probe.tasks.seg import SegTask
from sapiens2.errors import UnknownNameError

TASK_CLASSES = {t.name: t for t in (PoseTask, SegTask, NormalTask, PointmapTask, AlbedoTask)}


def build_task(name: str, protocol) -> ProbeTask:
    """The task object for ``name`` under ``protocol``."""
    if name not in TASK_CLASSES:
        raise UnknownNameError("probe task", name, TASK_CLASSES)
    return TASK_CLASSES[name](protocol)


__all__ = ["ProbeTask", "TASK_CLASSES", "build_task"]
