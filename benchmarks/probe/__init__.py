"""Frozen-backbone dense probing on the five Sapiens2 tasks (see ``docs/probing.md``).

Entry point: :func:`benchmarks.probe.api.run_probe`;
protocol: :class:`benchmarks.probe.protocol.ProbeProtocol`;
backbone plug-ins: :mod:`benchmarks.probe.backbones` (registry ``PROBE_BACKBONES``).
"""
