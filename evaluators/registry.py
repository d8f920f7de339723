"""Registries of the evaluators layer: ``METRICS`` (mmengine adapters) and ``EVALUATORS`` (ours).

``METRICS`` (scope ``sapiens2``, child of mmengine's ``METRICS``): mmengine, mmpose or mmseg configs
name our metrics with the ``sapiens2.`` prefix; ``locations`` imports the two adapter modules on
first use, which registers every metric adapter.

``EVALUATORS``: the streaming evaluators by class name. Each evaluator class registers itself where
it is defined; ``locations`` are the modules of this package that do so, found by their decorator
(:func:`_registering_modules`: nothing lists them, so a new evaluator module is found as it is
added), and a plug-in registers its evaluator when it is imported. The task table
(``sapiens2.tasks``) names each task's evaluator by this type name, so the bottom layer never imports
this one;
:func:`build_evaluator` turns a task name (or a type name) into an evaluator with the task's
official settings.

Example:
    >>> from evaluators.registry import METRICS, build_evaluator
    >>> from sapiens2.registry import build_from_cfg_checked
    >>> type(build_from_cfg_checked(METRICS, dict(type="SegMetric", num_classes=3))).__name__
    'SegMetric'
    >>> type(build_evaluator("normal")).__name__
    'NormalEvaluator'
    >>> build_evaluator("seg", num_classes=2).num_classes
    2
"""

from __future__ import annotations

from pathlib import Path

from mmengine.registry import METRICS as MM_METRICS
from mmengine.registry import Registry

from sapiens2.errors import UnknownNameError
from sapiens2.tasks import get_task, task_names

_PACKAGE = Path(__file__).resolve().parent
_DECORATOR = "@EVALUATORS.register_module("


def _registering_modules() -> list[str]:
    """The modules of this package that register an evaluator (their source uses the decorator).

    Read as text, not imported: the registry imports them on first use (``locations``).
    """
    found = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.name != "registry.py" and _DECORATOR in path.read_text(encoding="utf-8"):
            rel = path.relative_to(_PACKAGE.parent).with_suffix("")
            found.append(".".join(p for p in rel.parts if p != "__init__"))
    return found


METRICS = Registry(
    "metric",
    parent=MM_METRICS,
    scope="sapiens2",
    locations=["evaluators.mm_metrics", "evaluators.pose.mm_metric"],
)
EVALUATORS = Registry("evaluator", scope="sapiens2", locations=_registering_modules())


def evaluator_class(name: str) -> type:
    """The evaluator class of a task name (``"seg"``) or a registered type name (``"SegEvaluator"``).

    Raises:
        sapiens2.errors.UnknownNameError: neither a task nor a registered evaluator type.
    """
    EVALUATORS.import_from_location()
    type_name = get_task(name).evaluator if name in task_names() else name
    cls = EVALUATORS.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise UnknownNameError("evaluator", name, [*task_names(), *sorted(EVALUATORS.module_dict)])
    return cls


def build_evaluator(name: str, **kwargs):
    """An evaluator for a task (its official settings from the task table) or a registered type.

    Args:
        name: task name or registered evaluator type name.
        **kwargs: override the task's ``evaluator_kwargs``.

    Returns:
        The evaluator.
    """
    base = dict(get_task(name).evaluator_kwargs) if name in task_names() else {}
    return evaluator_class(name)(**{**base, **kwargs})
