"""Pose evaluation: a vectorised COCO keypoint AP engine (xtcocotools semantics), the official
top-down pipeline (instance scoring, OKS-NMS), ``PoseEvaluator``, parity handlers and the CLI.

Imports are lazy: the file-based path (``evaluators.pose.cli``, ``coco_io``, ``coco_ap``,
``metadata``) needs only NumPy; ``PoseEvaluator`` (torch) and ``PoseMetric`` (mmengine) load on
first access.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "STAT_NAMES": "evaluators.pose.coco_ap",
    "KeypointDetections": "evaluators.pose.coco_ap",
    "KeypointGroundTruth": "evaluators.pose.coco_ap",
    "evaluate_keypoints": "evaluators.pose.coco_ap",
    "PoseEvaluator": "evaluators.pose.evaluator",
    "KeypointMeta": "evaluators.pose.metadata",
    "load_meta": "evaluators.pose.metadata",
    "PoseMetric": "evaluators.pose.mm_metric",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    """Import ``name`` from its module on first access."""
    if name not in _LAZY:
        raise AttributeError(f"module 'evaluators.pose' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
