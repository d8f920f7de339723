"""Registries of the probe: the backbones it can freeze and the tasks it can probe.

No parent: mmengine allows one child per scope, and ``sapiens2.registry.MODELS`` already is the
``sapiens2`` child of mmengine's ``MODELS``.

``PROBE_TASKS`` maps a task name to its :class:`~benchmarks.probe.tasks.ProbeTask` subclass; each
task module registers its class where it is defined (``@register_probe_task``), and ``locations``
imports the ``benchmarks.probe.tasks`` package, which imports every module in its folder.
"""

from __future__ import annotations

from mmengine.registry import Registry

PROBE_BACKBONES = Registry("probe backbone", scope="sapiens2", locations=["benchmarks.probe.backbones"])
PROBE_TASKS = Registry("probe task", scope="sapiens2", locations=["benchmarks.probe.tasks"])
