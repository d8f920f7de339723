"""Backbone names -> configs, and the builder used by the probe."""

from __future__ import annotations

import inspect
import json

import torch

from benchmarks.probe.backbones.base import ProbeBackbone
from benchmarks.probe.backbones.hf import PRESETS as HF_PRESETS
from benchmarks.probe.backbones.hf import hf_preset
from benchmarks.probe.registry import PROBE_BACKBONES
from sapiens2.registry import build_from_cfg_checked

SAPIENS2_NAMES = (
    "sapiens2_0.1b",
    "sapiens2_0.4b",
    "sapiens2_0.8b",
    "sapiens2_1b",
    "sapiens2_5b",
    "sapiens2_tiny",
)
SAPIENS_V1_NAMES = ("sapiens_0.3b", "sapiens_0.6b", "sapiens_1b", "sapiens_2b", "sapiens_tiny")


def list_presets() -> list[str]:
    """Every backbone name ``--backbone`` accepts besides registered type names and JSON dicts."""
    hf = list(HF_PRESETS) + [f"{n}_tiny" for n in HF_PRESETS]
    return sorted([*SAPIENS2_NAMES, *SAPIENS_V1_NAMES, *hf, "pixels", "pixels_p8"])


def resolve_backbone_cfg(spec: str | dict) -> dict:
    """Turn a backbone name, a JSON string or a dict into a ``PROBE_BACKBONES`` config dict.

    Raises:
        KeyError: an unknown name; the message lists the presets.
    """
    if isinstance(spec, dict):
        return dict(spec)
    spec = str(spec).strip()
    if spec.startswith("{"):
        try:
            return dict(json.loads(spec))
        except json.JSONDecodeError as e:
            raise ValueError(f"--backbone: malformed JSON config {spec!r} ({e})") from e
    if spec in SAPIENS2_NAMES:
        return dict(type="Sapiens2Probe", arch=spec)
    if spec in SAPIENS_V1_NAMES:
        return dict(type="SapiensV1Probe", arch=spec)
    if spec in HF_PRESETS:
        return hf_preset(spec)
    if spec.endswith("_tiny") and spec[: -len("_tiny")] in HF_PRESETS:
        return hf_preset(spec[: -len("_tiny")], tiny=True)
    if spec == "pixels":
        return dict(type="PixelPatches", patch_size=16)
    if spec == "pixels_p8":
        return dict(type="PixelPatches", patch_size=8)
    PROBE_BACKBONES.import_from_location()
    if PROBE_BACKBONES.get(spec) is not None:
        return dict(type=spec)
    raise KeyError(
        f"unknown probe backbone {spec!r}; presets: {', '.join(list_presets())}; registered "
        f"types: {', '.join(sorted(PROBE_BACKBONES.module_dict))}"
    )


def backbone_label(spec: str | dict) -> str:
    """A short name for files and records."""
    if isinstance(spec, str) and not spec.strip().startswith("{"):
        return spec
    cfg = resolve_backbone_cfg(spec)
    return str(cfg.get("name") or cfg.get("arch") or cfg.get("family") or cfg["type"])


def build_probe_backbone(
    spec: str | dict,
    checkpoint: str | None = None,
    img_size: tuple[int, int] | None = None,
    init_seed: int = 0,
) -> ProbeBackbone:
    """Build a frozen probing backbone in eval mode.

    Args:
        spec: preset name, registered type name, JSON string or config dict.
        checkpoint: optional weights file/folder (checked strictly against the arch).
        img_size: input size (H, W) for backbones whose position grid depends on it.
        init_seed: torch seed set before building (random initialisation is reproducible).

    Returns:
        The backbone with ``requires_grad=False`` everywhere.
    """
    cfg = resolve_backbone_cfg(spec)
    cfg.pop("name", None)
    PROBE_BACKBONES.import_from_location()
    cls = PROBE_BACKBONES.get(cfg.get("type", ""))
    accepts = inspect.signature(cls.__init__).parameters if cls is not None else {}
    if checkpoint:
        if cls is not None and "checkpoint" not in accepts:
            raise ValueError(f"probe backbone {cfg['type']!r} takes no checkpoint (got {checkpoint})")
        cfg["checkpoint"] = str(checkpoint)
    if img_size is not None and "img_size" in accepts:
        cfg.setdefault("img_size", tuple(img_size))
    # random-init weights are a function of this seed: every rank and every run builds the same backbone
    torch.manual_seed(init_seed)
    model = build_from_cfg_checked(PROBE_BACKBONES, cfg)
    if not isinstance(model, ProbeBackbone):
        raise TypeError(f"probe backbone {cfg['type']!r} is not a ProbeBackbone subclass")
    model.eval()
    if model.weights == "random":
        model.weights = f"random(seed={init_seed})"
    for p in model.parameters():
        p.requires_grad_(False)
    return model
