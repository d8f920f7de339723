"""Evaluators of sapiens2-bench: one streaming, mergeable evaluator per task.

The package imports lazily (module ``__getattr__``): ``import evaluators`` or
``import evaluators.pose.cli`` loads neither torch nor mmengine, so the NumPy-only pose scoring
from files starts fast. The dense evaluators, ``EVALUATORS`` and the mmengine adapters load on
first use; the ``METRICS`` registry's ``locations`` import the adapter modules
(``evaluators.mm_metrics``, ``evaluators.pose.mm_metric``) themselves.

mmengine configs: ``custom_imports = dict(imports=["evaluators.registry"])`` creates the
``sapiens2`` metric scope, so that ``type="sapiens2.SegMetric"`` (or ``PoseMetric``...) resolves.
``import evaluators`` does that too when mmengine is already loaded (as in any mmengine run).

Example:
    >>> from evaluators import EVALUATORS, SegEvaluator, NormalEvaluator, PointmapEvaluator
    >>> sorted(EVALUATORS)[:2]
    ['albedo', 'normal']
"""

from __future__ import annotations

import importlib
import sys

_LAZY = {
    "AlbedoEvaluator": "evaluators.albedo",
    "Evaluator": "evaluators.base",
    "NormalEvaluator": "evaluators.normal",
    "PointmapEvaluator": "evaluators.pointmap",
    "PoseEvaluator": "evaluators.pose.evaluator",
    "SegEvaluator": "evaluators.seg",
}

__all__ = ["EVALUATORS", *sorted(_LAZY)]


def _evaluators() -> dict:
    names = {"seg": "SegEvaluator", "normal": "NormalEvaluator", "pointmap": "PointmapEvaluator"}
    names.update(albedo="AlbedoEvaluator", pose="PoseEvaluator")
    return {task: __getattr__(cls) for task, cls in names.items()}


def __getattr__(name: str):
    """Import the evaluator class (or build ``EVALUATORS``) on first access."""
    if name == "EVALUATORS":
        value = _evaluators()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'evaluators' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if "mmengine" in sys.modules:  # an mmengine run: create the sapiens2 metric scope (no torch needed)
    importlib.import_module("evaluators.registry")
