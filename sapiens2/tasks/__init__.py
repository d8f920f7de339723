"""The task table: one module per task, each registering a :class:`TaskSpec` (see ``spec.py``).

Example:
    >>> from sapiens2.tasks import get_task
    >>> get_task("seg").evaluator
    'SegEvaluator'
"""

from sapiens2.tasks.spec import (
    Feed,
    TaskSpec,
    all_tasks,
    get_task,
    register_task,
    task_names,
    unregister_task,
)

# Registration order is the display order everywhere (CLI choices, tables).
from sapiens2.tasks import pose, seg, normal, pointmap, albedo  # noqa: E402,F401,I001

__all__ = ["Feed", "TaskSpec", "all_tasks", "get_task", "register_task", "task_names", "unregister_task"]
