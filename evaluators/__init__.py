"""Evaluators of sapiens2-bench: one streaming, mergeable evaluator per task.

The package imports lazily (module ``__getattr__``): ``import evaluators`` or
``import evaluators.pose.cli`` loads neither torch nor mmengine, so the NumPy-only pose scoring
from files starts fast. The dense evaluators, ``EVALUATORS`` and the mmengine adapters load on
first use; the ``METRICS`` registry's ``locations`` import the adapter modules
(``evaluators.mm_metrics``, ``evaluators.pose.mm_metric``) themselves. An evaluator class
(``evaluators.SegEvaluator``) is looked up in ``EVALUATORS`` by its registered name, so nothing
here lists them.

mmengine configs: ``custom_imports = dict(imports=["evaluators.registry"])`` creates the
``sapiens2`` metric scope, so that ``type="sapiens2.SegMetric"`` (or ``PoseMetric``...) resolves.
``import evaluators`` does that too when mmengine is already loaded (as in any mmengine run).

Example:
    >>> from evaluators import EVALUATORS, SegEvaluator, build_evaluator
    >>> EVALUATORS.get("SegEvaluator") is SegEvaluator
    True
    >>> type(build_evaluator("normal")).__name__
    'NormalEvaluator'
"""

from __future__ import annotations

import importlib
import sys

# The registry and its look-ups (evaluators.registry needs mmengine, not torch).
_FROM_REGISTRY = ("EVALUATORS", "build_evaluator", "evaluator_class")

__all__ = [*_FROM_REGISTRY, "Evaluator"]


def __getattr__(name: str):
    """Import the registry's names, the base class or a registered evaluator class on first access."""
    if name in _FROM_REGISTRY:
        value = getattr(importlib.import_module("evaluators.registry"), name)
    elif name == "Evaluator":
        value = importlib.import_module("evaluators.base").Evaluator
    elif name.endswith("Evaluator") and not name.startswith("_"):
        registry = importlib.import_module("evaluators.registry").EVALUATORS
        registry.import_from_location()
        value = registry.module_dict.get(name)
        if value is None:
            raise AttributeError(f"module 'evaluators' has no attribute {name!r} "
                                 f"(registered evaluators: {sorted(registry.module_dict)})")
    else:
        raise AttributeError(f"module 'evaluators' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if "mmengine" in sys.modules:  # an mmengine run: create the sapiens2 metric scope (no torch needed)
    importlib.import_module("evaluators.registry")
