"""The probing tasks, one small module each (settings, targets, loss, evaluator adapter, oracle features).

Every module of this folder is imported here, and each registers its :class:`ProbeTask` subclass
(with its own settings class and defaults) in :data:`benchmarks.probe.registry.PROBE_TASKS`; a
plug-in registers its task the same way from anywhere. Nothing lists the tasks: they are the tasks
of the task table (``sapiens2.tasks``, in its order) that have a registered probe task. A task of
the table without one is reported by the contract test in ``tests/sapiens2/tasks/test_task_table.py``.

Example:
    >>> from benchmarks.probe.tasks import probe_task_class, probe_task_names
    >>> probe_task_names()
    ('pose', 'seg', 'normal', 'pointmap', 'albedo')
    >>> probe_task_class("pose").settings_class().sigma
    2.0
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from benchmarks.probe.registry import PROBE_TASKS
from benchmarks.probe.tasks.base import ProbeTask, register_probe_task, unregister_probe_task
from sapiens2.errors import UnknownNameError
from sapiens2.tasks import task_names

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


def probe_task_names() -> tuple[str, ...]:
    """Names of the tasks the probe can run: the task table's tasks with a registered probe task."""
    PROBE_TASKS.import_from_location()
    return tuple(name for name in task_names() if name in PROBE_TASKS.module_dict)


def probe_task_class(name: str) -> type[ProbeTask]:
    """The registered :class:`ProbeTask` subclass of task ``name``.

    Raises:
        UnknownNameError: not a task of the table with a registered probe task.
    """
    if name not in probe_task_names():
        raise UnknownNameError("probe task", name, probe_task_names())
    return PROBE_TASKS.module_dict[name]


def task_classes() -> dict[str, type[ProbeTask]]:
    """Every probe task class by name, in the task table's order."""
    return {name: PROBE_TASKS.module_dict[name] for name in probe_task_names()}


def build_task(name: str, protocol: ProtocolView) -> ProbeTask:
    """The task object for ``name`` under ``protocol``."""
    return probe_task_class(name)(protocol)


__all__ = [
    "ProbeTask",
    "build_task",
    "probe_task_class",
    "probe_task_names",
    "register_probe_task",
    "task_classes",
    "unregister_probe_task",
]
