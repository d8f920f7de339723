"""Evaluators of sapiens2-bench: one streaming, mergeable evaluator per task.

Importing the package imports every module that registers an mmengine metric (the ``METRICS``
registry's ``locations`` point here). The pose evaluator lives in ``evaluators.pose``.

Example:
    >>> from evaluators import SegEvaluator, NormalEvaluator, PointmapEvaluator, AlbedoEvaluator
    >>> EVALUATORS.get("SegEvaluator") is SegEvaluator
    True
"""

from evaluators import mm_metrics  # noqa: F401,E402  (registers the mmengine adapters)
from evaluators.albedo import AlbedoEvaluator
from evaluators.base import Evaluator
from evaluators.normal import NormalEvaluator
from evaluators.pointmap import PointmapEvaluator
from evaluators.pose import PoseEvaluator  # noqa: E402
from evaluators.registry import EVALUATORS, build_evaluator, evaluator_class
from evaluators.seg import SegEvaluator

for _cls in (SegEvaluator, NormalEvaluator, PointmapEvaluator, AlbedoEvaluator, PoseEvaluator):
    EVALUATORS.register_module(module=_cls, force=True)

__all__ = [
    "EVALUATORS",
    "AlbedoEvaluator",
    "Evaluator",
    "NormalEvaluator",
    "PointmapEvaluator",
    "PoseEvaluator",
    "SegEvaluator",
    "build_evaluator",
    "evaluator_class",
]
