"""The task table: one module per task, each registering a :class:`TaskSpec` (see ``spec.py``).

Example:
    >>> from sapiens2.tasks import get_task
    >>> get_task("seg").evaluator
    'SegEvaluator'
"""

import importlib

from sapiens2.tasks.spec import (
    Feed,
    TaskSpec,
    all_tasks,
    get_task,
    register_task,
    task_names,
    unregister_task,
)

# The registration: one module per task. This order is the display order everywhere (CLI choices,
# tables); a module registers its spec when imported.
for _module in ("pose", "seg", "normal", "pointmap", "albedo"):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["Feed", "TaskSpec", "all_tasks", "get_task", "register_task", "task_names", "unregister_task"]
