"""Registries of the probe: the backbones it can freeze, the tasks it can probe and its read-outs.

No parent: mmengine allows one child per scope, and ``sapiens2.registry.MODELS`` already is the
``sapiens2`` child of mmengine's ``MODELS``.

``PROBE_TASKS`` maps a task name to its :class:`~benchmarks.probe.tasks.ProbeTask` subclass; each
task module registers its class where it is defined (``@register_probe_task``), and ``locations``
imports the ``benchmarks.probe.tasks`` package, which imports every module in its folder.
``PROBE_READOUTS`` maps a ``TaskSettings.decoder`` name to its
:class:`~benchmarks.probe.readout.base.ProbeReadout` subclass (``@register_readout``, one module per
read-out). Losses register per task in :mod:`benchmarks.probe.train.losses`.
"""

from __future__ import annotations

from mmengine.registry import Registry

PROBE_BACKBONES = Registry("probe backbone", scope="sapiens2", locations=["benchmarks.probe.backbones"])
PROBE_TASKS = Registry("probe task", scope="sapiens2", locations=["benchmarks.probe.tasks"])
PROBE_READOUTS = Registry(
    "probe read-out", scope="sapiens2",
    locations=["benchmarks.probe.readout.linear", "benchmarks.probe.readout.pixelshuffle"],
)
