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

try:  # mmengine adapters (registered in sapiens2.registry.METRICS)
    from evaluators import mm_metrics  # noqa: F401
except ModuleNotFoundError as e:  # pragma: no cover - mmengine is a core dependency
    if e.name not in ("mmengine",):
        raise

try:  # the pose evaluator (built separately); absent until it lands
    from evaluators import pose as _pose  # noqa: F401

    if hasattr(_pose, "PoseEvaluator"):
        from evaluators.pose import PoseEvaluator  # noqa: F401

        EVALUATORS["pose"] = PoseEvaluator
except ModuleNotFoundError as e:
    if not (e.name or "").startswith("evaluators.pose"):
        raise

__all__ = [
    "EVALUATORS",
    "AlbedoEvaluator",
    "Evaluator",
    "NormalEvaluator",
    "PointmapEvaluator",
    "SegEvaluator",
]
