"""Probing backbone plug-ins, registered in ``sapiens2.registry.PROBE_BACKBONES``.

Use :func:`build_probe_backbone` with a preset name (``sapiens2_0.1b``, ``dinov2_small``, ``pixels``,
...), a registered type name, or a config dict ``{"type": ..., ...}``.
"""

from __future__ import annotations

from benchmarks.probe.backbones.base import FeatureShapeError, ProbeBackbone, tokens_to_featmap
from benchmarks.probe.backbones.hf import HFViTProbe, hf_preset
from benchmarks.probe.backbones.pixels import PixelPatches
from benchmarks.probe.backbones.presets import build_probe_backbone, list_presets, resolve_backbone_cfg
from benchmarks.probe.backbones.sapiens import Sapiens2Probe, SapiensV1Probe

__all__ = [
    "FeatureShapeError",
    "ProbeBackbone",
    "tokens_to_featmap",
    "HFViTProbe",
    "hf_preset",
    "PixelPatches",
    "Sapiens2Probe",
    "SapiensV1Probe",
    "build_probe_backbone",
    "list_presets",
    "resolve_backbone_cfg",
]
