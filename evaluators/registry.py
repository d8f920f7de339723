"""The metric registry of sapiens2-bench (scope ``sapiens2``, child of mmengine's ``METRICS``).

mmengine, mmpose or mmseg configs name our metrics with the ``sapiens2.`` prefix; ``locations``
imports the two adapter modules on first use, which registers every metric adapter.

Example:
    >>> from evaluators.registry import METRICS
    >>> from sapiens2.registry import build_from_cfg_checked
    >>> type(build_from_cfg_checked(METRICS, dict(type="SegMetric", num_classes=3))).__name__
    'SegMetric'
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
