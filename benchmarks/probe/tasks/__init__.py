"""The five probing tasks, one small module each (targets, loss, evaluator adapter, oracle features)."""

from __future__ import annotations

import importlib

from benchmarks.probe.tasks.albedo import AlbedoTask
from benchmarks.probe.tasks.base import ProbeTask
from benchmarks.probe.tasks.normal import NormalTask
from benchmarks.probe.tasks.pointmap import PointmapTask
from benchmarks.probe.tasks.pose import PoseTask
from benchmarks.probe.tasks.seg import SegTask

TASK_CLASSES = {t.name: t for t in (PoseTask, SegTask, NormalTask, PointmapTask, AlbedoTask)}


def build_task(name: str, protocol) -> ProbeTask:
    """The task object for ``name`` under ``protocol``."""
    if name not in TASK_CLASSES:
        raise KeyError(f"unknown probe task {name!r}; known: {', '.join(TASK_CLASSES)}")
    return TASK_CLASSES[name](protocol)


def import_evaluator(class_name: str, module: str):
    """``evaluators.<module>.<class_name>``, or a RuntimeError saying which evaluator is missing."""
    try:
        return getattr(importlib.import_module(f"evaluators.{module}"), class_name)
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"evaluator {class_name} (evaluators/{module}.py) is not available: {e}") from e


__all__ = ["ProbeTask", "TASK_CLASSES", "build_task", "import_evaluator"]
