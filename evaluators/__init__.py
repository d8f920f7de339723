"""Evaluators of sapiens2-bench: one streaming, mergeable evaluator per task.

Importing the package imports every module that registers an mmengine metric (the ``METRICS``
registry's ``locations`` point here). The pose evaluator lives in ``evaluators.pose``.

Example:
    >>> from evaluators import SegEvaluator, NormalEvaluator, PointmapEvaluator, AlbedoEvaluator
    >>> sorted(EVALUATORS)[:2]
    ['albedo', 'normal']
"""

from evaluators.albedo import AlbedoEvaluator
from evaluators.base import Evaluator
from evaluators.normal import NormalEvaluator
from evaluators.pointmap import PointmapEvaluator
from evaluators.seg import SegEvaluator

EVALUATORS = {
    "seg": SegEvaluator,
    "normal": NormalEvaluator,
    "pointmap": PointmapEvaluator,
    "albedo": AlbedoEvaluator,
}

from evaluators import mm_metrics  # noqa: F401,E402  (registers the mmengine adapters)
from evaluators.pose import PoseEvaluator  # noqa: E402

EVALUATORS["pose"] = PoseEvaluator

__all__ = [
    "EVALUATORS",
    "AlbedoEvaluator",
    "Evaluator",
    "NormalEvaluator",
    "PointmapEvaluator",
    "PoseEvaluator",
    "SegEvaluator",
]
