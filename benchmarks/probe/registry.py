"""Registry of the backbones the probing protocol can freeze (Sapiens2, v1, transformers, pixels).

No parent: mmengine allows one child per scope, and ``sapiens2.registry.MODELS`` already is the
``sapiens2`` child of mmengine's ``MODELS``.
"""

from __future__ import annotations

from mmengine.registry import Registry

PROBE_BACKBONES = Registry("probe backbone", scope="sapiens2", locations=["benchmarks.probe.backbones"])
