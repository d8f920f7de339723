"""Frozen-backbone dense probing on the five Sapiens2 tasks (see ``docs/probing.md``).

Entry point: :func:`benchmarks.probe.api.run_probe`;
protocol: :class:`benchmarks.probe.protocol.ProbeProtocol` (its groups: :mod:`benchmarks.probe.config`);
stages, in flow order: ``data/``, ``features/``, ``readout/``, ``train/``, ``records/``;
plug-ins: backbones (``PROBE_BACKBONES``), tasks (``PROBE_TASKS``), read-outs (``PROBE_READOUTS``),
all in :mod:`benchmarks.probe.registry`. The map: ``benchmarks/probe/README.md``.
"""
