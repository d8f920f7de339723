"""Pose evaluation: a vectorised COCO keypoint AP engine (xtcocotools semantics), the official
top-down pipeline (instance scoring, OKS-NMS), ``PoseEvaluator``, parity handlers and the CLI."""

from evaluators.pose.coco_ap import STAT_NAMES, KeypointDetections, KeypointGroundTruth, evaluate_keypoints
from evaluators.pose.evaluator import PoseEvaluator
from evaluators.pose.metadata import KeypointMeta, load_meta
from evaluators.pose.mm_metric import PoseMetric  # registers sapiens2.PoseMetric

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
