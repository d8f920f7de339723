"""The task table: one module per task, each registering a :class:`TaskSpec` (see ``spec.py``).

Every module of this folder is imported here (nothing lists them); each registers its spec and
sets ``ORDER``, its place in the display order everywhere (CLI choices, tables). A plug-in task
registers its spec with :func:`register_task` from anywhere and comes after these.

Example:
    >>> from sapiens2.tasks import get_task, task_names
    >>> get_task("seg").evaluator
    'SegEvaluator'
    >>> task_names()
    ('pose', 'seg', 'normal', 'pointmap', 'albedo')
"""

import importlib
import pkgutil

from sapiens2.tasks.spec import (
    Feed,
    TaskSpec,
    all_tasks,
    get_task,
    model_task_names,
    register_task,
    sort_tasks,
    task_names,
    unregister_task,
)

_ORDER = {}
for _info in pkgutil.iter_modules(__path__):
    if _info.name != "spec":
        _module = importlib.import_module(f"{__name__}.{_info.name}")
        _ORDER[_module.SPEC.name] = _module.ORDER
sort_tasks(lambda name: _ORDER.get(name, float("inf")))

__all__ = ["Feed", "TaskSpec", "all_tasks", "get_task", "model_task_names", "register_task", "task_names",
           "unregister_task"]
