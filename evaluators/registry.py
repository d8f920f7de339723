"""Registries of the evaluators layer: ``METRICS`` (mmengine adapters) and ``EVALUATORS`` (ours).

``METRICS`` (scope ``sapiens2``, child of mmengine's ``METRICS``): mmengine, mmpose or mmseg configs
name our metrics with the ``sapiens2.`` prefix; ``locations`` imports the two adapter modules on
first use, which registers every metric adapter.

``EVALUATORS``: the streaming evaluators by class name. The task table (``sapiens2.tasks``) names
each task's evaluator by this type name, so the bottom layer never imports this one;
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

from mmengine.registry import METRICS as MM_METRICS
from mmengine.registry import Registry

METRICS = Registry(
    "metric",
    parent=MM_METRICS,
    scope="sapiens2",
    locations=["evaluators.mm_metrics", "evaluators.pose.mm_metric"],
)
# Each evaluator class registers itself where it is defined; the locations import those modules.
EVALUATORS = Registry(
    "evaluator",
    scope="sapiens2",
    locations=[
        "evaluators.seg",
        "evaluators.normal",
        "evaluators.pointmap",
        "evaluators.albedo",
        "evaluators.pose.evaluator",
    ],
)
