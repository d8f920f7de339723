"""The probing tasks, one small module each (targets, loss, evaluator adapter, oracle features).

Every task of the task table (``sapiens2.tasks``) has a probe task here; a task without one is
reported by :func:`build_task` (and by the contract test in ``tests/test_task_table.py``).
"""

from __future__ import annotations

from benchmarks.probe.tasks.albedo import AlbedoTask
from benchmarks.probe.tasks.base import ProbeTask
from benchmarks.probe.tasks.normal import NormalTask
from benchmarks.probe.tasks.pointmap import PointmapTask
from benchmarks.probe.tasks.pose import PoseTask
from benchmarks.probe.tasks.seg import SegTask
from sapiens2.errors import UnknownNameError
from sapiens2.tasks import task_names

_PROBE_CLASSES = {t.name: t for t in (PoseTask, SegTask, NormalTask, PointmapTask, AlbedoTask)}
# In the task table's order; only tasks of the table.
TASK_CLASSES = {name: _PROBE_CLASSES[name] for name in task_names() if name in _PROBE_CLASSES}


def build_task(name: str, protocol) -> ProbeTask:
    """The task object for ``name`` under ``protocol``."""
    if name not in TASK_CLASSES:
        raise UnknownNameError("probe task", name, TASK_CLASSES)
    return TASK_CLASSES[name](protocol)


__all__ = ["ProbeTask", "TASK_CLASSES", "build_task"]
