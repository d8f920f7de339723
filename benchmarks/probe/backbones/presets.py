"""Backbone names -> configs, the builder used by the probe, and the ``--list-backbones`` table.

A backbone is named by a preset (``sapiens2_0.1b``, ``dinov2_small``, ``pixels``, ...), a type
registered in ``PROBE_BACKBONES`` (after ``--include`` imports), ``package.module:ClassName``, or a
config dict / JSON string whose ``type`` is one of the last two.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence

import torch

from benchmarks.probe.backbones.base import ProbeBackbone
from benchmarks.probe.backbones.hf import PRESETS as HF_PRESETS
from benchmarks.probe.backbones.hf import hf_preset
from benchmarks.probe.backbones.plugins import BackboneSpecError, backbone_class, is_class_path
from benchmarks.probe.registry import PROBE_BACKBONES
from sapiens2.errors import UnknownNameError
from sapiens2.models.variants import variants
from sapiens2.weights import SHIPPED, backbone_config, weights_path

ORACLE = "gt-oracle"
# the feature-free floor: constant features, so the read-out is its per-pixel train prior (no backbone)
FLOOR = "floor"
REFERENCE_BACKBONES = (ORACLE, FLOOR)
# The Sapiens presets: the probe variants of the one variant table (sapiens2.models.variants)
SAPIENS2_NAMES = tuple(v.name for v in variants("sapiens2", probe=True))
SAPIENS_V1_NAMES = tuple(v.name for v in variants("sapiens", probe=True))
# Backbones pretrained here and shipped in sapiens2/weights/ (with their weights), and their
# random-init twins (same arch, no weights): NAME and NAME + RANDOM_SUFFIX.
RANDOM_SUFFIX = "-random"
SHIPPED_NAMES = tuple(n for name in sorted(SHIPPED) for n in (name, name + RANDOM_SUFFIX))


def shipped_cfg(name: str) -> dict:
    """The probe config of a shipped backbone (its weights file included) or of its random twin.

    Example:
        >>> cfg = shipped_cfg("sapiens2_cpu_small-random")
        >>> cfg["type"], cfg["patch_size"], "checkpoint" in cfg
        ('Sapiens2Probe', 16, False)
    """
    base = name[: -len(RANDOM_SUFFIX)] if name.endswith(RANDOM_SUFFIX) else name
    bb = backbone_config(base)
    cfg = dict(type="Sapiens2Probe", **{k: v for k, v in bb.items() if k not in ("type", "img_size")})
    if base == name:
        cfg["checkpoint"] = str(weights_path(base, must_exist=False))
    return cfg


def twin_pairs(names: list[str]) -> list[tuple[str, str]]:
    """``(X, twin)`` for every backbone X of ``names`` whose random-init twin is in ``names`` too.

    The twin is ``X-random``; a shipped backbone without its own twin in ``names`` takes the twin of
    another shipped backbone of the same arch (same config, same init seed: the same model).

    Example:
        >>> twin_pairs(["m.x:Cls", "m.x:Cls-random", "sapiens2_cpu_small_mae", "sapiens2_cpu_small-random"])
        [('m.x:Cls', 'm.x:Cls-random'), ('sapiens2_cpu_small_mae', 'sapiens2_cpu_small-random')]
    """
    pairs = []
    for x in names:
        if x + RANDOM_SUFFIX in names:
            pairs.append((x, x + RANDOM_SUFFIX))
        elif x in SHIPPED:
            pairs += [(x, y + RANDOM_SUFFIX) for y in sorted(SHIPPED)
                      if y + RANDOM_SUFFIX in names and backbone_config(y) == backbone_config(x)][:1]
    return pairs


def list_presets() -> list[str]:
    """Every backbone name ``--backbone`` accepts besides registered type names and JSON dicts."""
    hf = list(HF_PRESETS) + [f"{n}_tiny" for n in HF_PRESETS]
    return sorted([*SAPIENS2_NAMES, *SAPIENS_V1_NAMES, *hf, *SHIPPED_NAMES, "pixels", "pixels_p8"])


def _registered(name: str) -> type | None:
    PROBE_BACKBONES.import_from_location()
    return PROBE_BACKBONES.module_dict.get(name)


def backbone_type(type_name: str | type[ProbeBackbone]) -> type[ProbeBackbone]:
    """The class a config's ``type`` names: a registered type or ``package.module:ClassName``.

    Raises:
        UnknownNameError: an unregistered name (lists the registered types).
        BackboneSpecError: a ``module:Class`` that cannot be imported or is not a probe backbone.
    """
    if inspect.isclass(type_name) and issubclass(type_name, ProbeBackbone):
        return type_name
    if is_class_path(type_name):
        return backbone_class(type_name)
    cls = _registered(str(type_name))
    if cls is None:
        known = [*sorted(PROBE_BACKBONES.module_dict), "package.module:ClassName"]
        raise UnknownNameError("probe backbone type", type_name, known)
    if not (inspect.isclass(cls) and issubclass(cls, ProbeBackbone)):
        raise BackboneSpecError(f"probe backbone type {type_name!r} is not a ProbeBackbone subclass")
    return cls


def resolve_backbone_cfg(spec: str | dict) -> dict:
    """Turn a backbone name, a JSON string or a dict into a ``PROBE_BACKBONES`` config dict.

    The config's ``type`` is checked here (it names a probe backbone class), so a bad name fails
    before any data is read or any model is built.

    Raises:
        UnknownNameError: an unknown name; the message lists the presets and registered types.
        BackboneSpecError: malformed JSON, a config without ``type``, or a bad ``module:Class``.
    """
    if isinstance(spec, dict):
        cfg = dict(spec)
    else:
        cfg = _named_cfg(str(spec).strip())
    if "type" not in cfg:
        raise BackboneSpecError(f"--backbone {spec!r}: a config needs a 'type' key")
    backbone_type(cfg["type"])
    return cfg


def _named_cfg(spec: str) -> dict:
    if spec.startswith("{"):
        try:
            cfg = json.loads(spec)
        except json.JSONDecodeError as e:
            raise BackboneSpecError(f"--backbone: malformed JSON config {spec!r} ({e})") from e
        if not isinstance(cfg, dict):
            raise BackboneSpecError(f"--backbone: expected a JSON object, got {spec!r}")
        return cfg
    if spec in SAPIENS2_NAMES:
        return dict(type="Sapiens2Probe", arch=spec)
    if spec in SAPIENS_V1_NAMES:
        return dict(type="SapiensV1Probe", arch=spec)
    if spec in SHIPPED_NAMES:
        return shipped_cfg(spec)
    if spec in HF_PRESETS:
        return hf_preset(spec)
    if spec.endswith("_tiny") and spec[: -len("_tiny")] in HF_PRESETS:
        return hf_preset(spec[: -len("_tiny")], tiny=True)
    if spec == "pixels":
        return dict(type="PixelPatches", patch_size=16)
    if spec == "pixels_p8":
        return dict(type="PixelPatches", patch_size=8)
    if is_class_path(spec) or _registered(spec) is not None:
        return dict(type=spec)
    err = UnknownNameError(
        "probe backbone", spec, [*list_presets(), *REFERENCE_BACKBONES, *sorted(PROBE_BACKBONES.module_dict)]
    )
    err.args = (
        f"{err.args[0]}; or package.module:ClassName, a JSON config, or a class registered by a file "
        "imported with --include",
    )
    raise err


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
        spec: preset name, registered type name, ``package.module:ClassName``, JSON string or config dict.
        checkpoint: optional weights file/folder (checked strictly against the arch).
        img_size: input size (H, W) for backbones whose position grid depends on it.
        init_seed: torch seed set before building (random initialisation is reproducible).

    Returns:
        The backbone with ``requires_grad=False`` everywhere; ``weights`` is ``"none"`` for a backbone
        without parameters, ``"random(seed=...)"`` for a random initialisation.
    """
    cfg = resolve_backbone_cfg(spec)
    cfg.pop("name", None)
    type_name = cfg.pop("type")
    cls = backbone_type(type_name)
    accepts = inspect.signature(cls.__init__).parameters
    if checkpoint:
        if "checkpoint" not in accepts:
            raise BackboneSpecError(f"probe backbone {type_name!r} takes no weights (got {checkpoint})")
        cfg["checkpoint"] = str(checkpoint)
    if img_size is not None and "img_size" in accepts:
        cfg.setdefault("img_size", tuple(img_size))
    # random-init weights are a function of this seed: every rank and every run builds the same backbone
    torch.manual_seed(init_seed)
    try:
        model = cls(**cfg)
    except TypeError as e:
        raise BackboneSpecError(f"probe backbone {type_name!r}: bad config {cfg!r} ({e})") from e
    model.eval()
    if not any(True for _ in model.parameters()):
        model.weights = "none"
    elif model.weights == "random":
        model.weights = f"random(seed={init_seed})"
    for p in model.parameters():
        p.requires_grad_(False)
    return model


_FAMILIES = {"Sapiens2Probe": "sapiens2", "SapiensV1Probe": "sapiens (v1)", "PixelPatches": "pixels"}


def backbone_table(img_size: tuple[int, int] = (256, 192)) -> list[dict]:
    """The rows ``probe --list-backbones`` prints: every preset, ``gt-oracle`` and registered plug-ins.

    Parameters are counted on the ``meta`` device (no memory, no weights read) at ``img_size``.

    Returns:
        Dicts with ``name``, ``family``, ``params`` (None for a backbone without weights, or when it
        cannot be built without arguments) and ``weights`` (``"none"``, or how weights are given).
    """
    oracle = {
        "name": ORACLE,
        "family": "oracle",
        "params": None,
        "weights": "none (features = the ground truth)",
    }
    floor = {
        "name": FLOOR,
        "family": "floor",
        "params": None,
        "weights": "none (no features: the read-out's per-pixel train prior)",
    }
    rows = [oracle, floor]
    names = list_presets()
    preset_types = {resolve_backbone_cfg(n)["type"] for n in names}
    names += sorted(set(PROBE_BACKBONES.module_dict) - preset_types)
    for name in names:
        cfg = resolve_backbone_cfg(name)
        cls = backbone_type(cfg.pop("type"))
        family = cfg.get("family") or _FAMILIES.get(cls.__name__) or f"plug-in ({cls.__module__})"
        params = _meta_params(cls, cfg, img_size)
        takes = "checkpoint" in inspect.signature(cls.__init__).parameters
        if cls.weights == "none" or params == 0:
            weights, params = "none", None
        elif name in SHIPPED:
            weights = f"shipped: sapiens2/weights/{name}.safetensors (--weights PATH overrides)"
        elif name.endswith(RANDOM_SUFFIX) and name[: -len(RANDOM_SUFFIX)] in SHIPPED:
            weights = f"random init (the twin of {name[: -len(RANDOM_SUFFIX)]})"
        elif takes:
            weights = "needed: --weights PATH (random init without)"
        else:
            weights = "set by the plug-in (no --weights)"
        rows.append({"name": name, "family": family, "params": params, "weights": weights})
    return rows


def weight_free(spec: str | dict) -> bool:
    """Whether backbone ``spec`` has no weights at all (raw pixels, a parameter-free plug-in, the oracle)."""
    if spec in REFERENCE_BACKBONES:
        return True
    cfg = resolve_backbone_cfg(spec)
    cls = backbone_type(cfg.pop("type"))
    cfg.pop("name", None)
    return cls.weights == "none" or _meta_params(cls, cfg, (256, 192)) == 0


def _meta_params(cls: type[ProbeBackbone], cfg: dict, img_size: Sequence[int]) -> int | None:
    kwargs = {k: v for k, v in cfg.items() if k != "checkpoint"}  # count only: read no weights
    if "img_size" in inspect.signature(cls.__init__).parameters:
        kwargs.setdefault("img_size", tuple(img_size))
    try:
        with torch.device("meta"):
            return int(sum(p.numel() for p in cls(**kwargs).parameters()))
    except Exception:  # a plug-in that needs arguments or real tensors to build: count unknown
        return None


def format_params(n: int | None) -> str:
    """``-`` for None, else ``21.6M`` / ``0.114B``."""
    if n is None:
        return "-"
    return f"{n / 1e9:.3f}B" if n >= 1e8 else f"{n / 1e6:.2f}M"
