"""Probing backbone plug-ins, registered in ``benchmarks.probe.registry.PROBE_BACKBONES``.

Use :func:`build_probe_backbone` with a preset name (``sapiens2_0.1b``, ``dinov2_small``, ``pixels``,
...), a registered type name, ``package.module:ClassName``, or a config dict ``{"type": ..., ...}``;
:func:`import_paths` imports user files first (the CLI's ``--include``).
"""

from __future__ import annotations

from benchmarks.probe.backbones.base import FeatureShapeError, ProbeBackbone, tokens_to_featmap
from benchmarks.probe.backbones.hf import HFViTProbe, hf_preset
from benchmarks.probe.backbones.pixels import PixelPatches
from benchmarks.probe.backbones.plugins import BackboneSpecError, backbone_class, import_paths
from benchmarks.probe.backbones.presets import (
    FLOOR,
    ORACLE,
    REFERENCE_BACKBONES,
    backbone_label,
    backbone_table,
    backbone_type,
    build_probe_backbone,
    format_params,
    list_presets,
    resolve_backbone_cfg,
    weight_free,
)
from benchmarks.probe.backbones.sapiens import Sapiens2Probe, SapiensV1Probe

__all__ = [
    "FLOOR",
    "ORACLE",
    "REFERENCE_BACKBONES",
    "BackboneSpecError",
    "backbone_class",
    "backbone_label",
    "backbone_table",
    "backbone_type",
    "format_params",
    "import_paths",
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
    "weight_free",
]
