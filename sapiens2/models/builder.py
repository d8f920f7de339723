"""Build official Sapiens2 models from a config dict or an official config name.

Example:
    >>> from sapiens2.models.builder import build_model
    >>> model = build_model("sapiens2_0.4b_seg_shutterstock_goliath-1024x768", device="meta")
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import torch
from torch import nn

from sapiens2.models.variants import variants
from sapiens2.reference import official_task_configs
from sapiens2.registry import MODELS, build_from_cfg_checked


def official_config(name: str) -> dict:
    """The ``model`` config dict of an official task config (see ``sapiens2.reference``)."""
    configs = official_task_configs()
    if name not in configs:
        raise KeyError(f"unknown official config {name!r}; known: {', '.join(sorted(configs))}")
    return copy.deepcopy(configs[name]["model"])


def _official_backbone(name: str) -> dict | None:
    """The config of an official variant of the variant table (``sapiens2.models.variants``), or None."""
    return next((v.backbone_config() for v in variants(official=True) if v.name == name), None)


def substitute_arch(cfg: dict, arch_settings: Mapping[str, dict] | None) -> dict:
    """Copy of ``cfg`` whose ``arch`` names (top level or in ``backbone``) found in ``arch_settings``
    are replaced by their settings dicts.

    In a task config the head follows its backbone: ``decode_head.in_channels`` becomes the settings'
    ``embed_dims``, and a ``decode_head`` entry of the settings overrides head fields (the layout of a
    golden manifest's and ``reproduce --arch-settings``' settings).
    """
    cfg = copy.deepcopy(cfg)
    if not arch_settings:
        return cfg
    for node in (cfg, cfg.get("backbone")):
        if isinstance(node, dict) and isinstance(node.get("arch"), str) and node["arch"] in arch_settings:
            settings = dict(arch_settings[node["arch"]])
            head_overrides = settings.pop("decode_head", {})
            node["arch"] = settings
            head = cfg.get("decode_head")
            if node is cfg.get("backbone") and isinstance(head, dict):
                if "in_channels" in head and "embed_dims" in settings:
                    head["in_channels"] = int(settings["embed_dims"])
                head.update(head_overrides)
    return cfg


def build_model(cfg_or_name: str | Mapping, arch_settings: Mapping[str, dict] | None = None,
                device: str | torch.device | None = None) -> nn.Module:
    """Build a backbone or task model.

    Args:
        cfg_or_name: a config dict with ``type`` (e.g. an official ``model`` dict); an entry of
            ``official_task_configs()`` (a dict with a ``model`` key); the name of an official task
            config (``sapiens2.reference.official_task_configs()``); or an official backbone arch
            name such as ``'sapiens2_0.4b'``, ``'sapiens2_1b_4k'`` or ``'sapiens_0.3b'`` (v1).
        arch_settings: optional ``{arch name: settings dict}`` for archs that are not official
            (e.g. a golden manifest's ``arch_settings``).
        device: device to build on; ``'meta'`` allocates no memory (shapes and counts only).

    Returns:
        The built module (in train mode, as nn.Modules start).

    Raises:
        KeyError: an unknown config name or model type (the message lists the known ones).
    """
    if isinstance(cfg_or_name, str):
        backbone = _official_backbone(cfg_or_name)
        cfg = backbone if backbone is not None else official_config(cfg_or_name)
    elif isinstance(cfg_or_name, Mapping):
        cfg = dict(cfg_or_name)
        if "type" not in cfg and isinstance(cfg.get("model"), Mapping):
            cfg = dict(cfg["model"])
    else:
        raise TypeError(f"expected a config dict or name, got {type(cfg_or_name).__name__}")
    cfg = substitute_arch(cfg, arch_settings)
    if device is None:
        return build_from_cfg_checked(MODELS, cfg)
    with torch.device(device):
        return build_from_cfg_checked(MODELS, cfg)
