"""Probing plug-ins for the project's own backbones: Sapiens2 (any arch) and Sapiens v1."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from benchmarks.probe.backbones.base import LayerFeatures, ProbeBackbone
from benchmarks.probe.registry import PROBE_BACKBONES
from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file
from sapiens2.models.variants import variants
from sapiens2.registry import MODELS

# Tiny archs for tests and smoke runs (the test-sized variants of sapiens2.models.variants).
TINY_ARCHS = {v.name: dict(v.settings) for v in variants(official=False)}


def _arch(arch: str | dict) -> str | dict:
    return dict(TINY_ARCHS[arch]) if isinstance(arch, str) and arch in TINY_ARCHS else arch


def load_backbone_checkpoint(model: torch.nn.Module, path: str, what: str) -> None:
    """Load a backbone-only or task checkpoint (keys ``backbone.*``) strictly into ``model``.

    Raises:
        ValueError: the checkpoint does not fit the arch; names the file and lists the key problems.
    """
    state = load_state_dict_file(path)
    if any(k.startswith("backbone.") for k in state):
        state = {k[len("backbone.") :]: v for k, v in state.items() if k.startswith("backbone.")}
    try:
        load_checkpoint(model, state, strict=True)
    except Exception as e:  # CheckpointMismatchError and size errors
        raise ValueError(f"checkpoint {path} does not fit backbone {what}: {e}") from e


class _SapiensFamily(ProbeBackbone):
    """Shared wrapper: the model's ``forward_intermediates`` gives the uniform contract directly."""

    model_type = ""

    def __init__(self, arch: str | dict = "sapiens2_0.1b", img_size: Sequence[int] = (256, 192),
                 checkpoint: str | os.PathLike | None = None, **kwargs: object):
        super().__init__()
        p = int(kwargs.get("patch_size", 16))
        grid_size = tuple(-(-int(v) // p) * p for v in img_size)  # padded to the patch multiple
        self.model = MODELS.build(dict(type=self.model_type, arch=_arch(arch), img_size=grid_size, **kwargs))
        self.arch_name = arch if isinstance(arch, str) else "custom"
        self.patch_size = int(self.model.patch_size)
        self.embed_dims = int(self.model.embed_dims)
        self.num_layers = int(self.model.num_layers)
        self.has_cls = bool(getattr(self.model, "with_cls_token", True))
        if checkpoint:
            load_backbone_checkpoint(self.model, checkpoint, f"{self.model_type}({self.arch_name})")
            self.weights = str(checkpoint)

    def forward_layers(self, x: torch.Tensor, layers: list[int]) -> LayerFeatures:
        feats, cls = self.model.forward_intermediates(x, list(layers))
        return list(feats), (list(cls) if self.has_cls and cls is not None else None)

    def describe(self) -> dict:
        d = super().describe()
        d["arch"] = self.arch_name
        return d


@PROBE_BACKBONES.register_module()
class Sapiens2Probe(_SapiensFamily):
    """Sapiens2 (any official arch name, a tiny test arch, or a settings dict), optional checkpoint.

    Args:
        arch: arch name (``sapiens2_0.1b`` ... ``sapiens2_5b``, ``sapiens2_tiny``) or a settings dict.
        img_size: (H, W) the RoPE grid is built for (the probe's padded input size).
        checkpoint: optional backbone or task ``.safetensors``/``.pth`` checkpoint (strict).
        **kwargs: forwarded to ``Sapiens2`` (e.g. ``pos_embed_rope_dtype``).
    """

    model_type = "Sapiens2"


@PROBE_BACKBONES.register_module()
class SapiensV1Probe(_SapiensFamily):
    """Sapiens v1 (``sapiens_0.3b`` ... ``sapiens_2b``, ``sapiens_tiny``, or a dict); optional checkpoint."""

    model_type = "Sapiens"
