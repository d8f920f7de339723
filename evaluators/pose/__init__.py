"""Pose evaluation: a vectorised COCO keypoint AP engine (xtcocotools semantics), the official
top-down pipeline (instance scoring, OKS-NMS), ``PoseEvaluator``, parity handlers and the CLI."""

from evaluators.pose.coco_ap import STAT_NAMES, KeypointDetections, KeypointGroundTruth, evaluate_keypoints
from evaluators.pose.evaluator import PoseEvaluator
from evaluators.pose.metadata import KeypointMeta, load_meta

try:  # registers sapiens2.PoseMetric (mmengine BaseMetric adapter)
    from evaluators.pose.mm_metric import PoseMetric
except ModuleNotFoundError as e:  # pragma: no cover - mmengine is a core dependency
    if e.name != "mmengine":
        raise

__all__ = [
    "STAT_NAMES",
    "KeypointDetections",
    "KeypointGroundTruth",
    "KeypointMeta",
    "PoseEvaluator",
    "PoseMetric",
    "evaluate_keypoints",
    "load_meta",
]
