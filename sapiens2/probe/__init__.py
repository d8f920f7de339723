"""Frozen-backbone dense probing on the five Sapiens2 tasks (see ``docs/probing.md``).

Entry point: :func:`sapiens2.probe.api.run_probe`; protocol: :class:`sapiens2.probe.protocol.ProbeProtocol`;
backbone plug-ins: :mod:`sapiens2.probe.backbones` (registry ``PROBE_BACKBONES``).
"""
