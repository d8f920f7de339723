"""Baseline ViTs through Hugging Face ``transformers``: DINOv2 (with/without registers), DINOv3, MAE,
CLIP and SigLIP vision towers.

Each is built offline either from a config (random initialisation; ``config`` overrides the
family's defaults) or from a local folder / file (``pretrained``: a ``save_pretrained`` folder, or a
single ``.safetensors`` file plus ``config``). No network access is ever attempted.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import torch

from benchmarks.probe.backbones.base import LayerFeatures, ProbeBackbone, tokens_to_featmap
from benchmarks.probe.registry import PROBE_BACKBONES
from sapiens2.errors import UnknownNameError
from sapiens2.models.checkpoint import check_finite, load_state_dict_file, pickle_refused

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)

# family -> (config class, model class, final-norm attribute, has CLS, register-token config key, mean, std)
FAMILIES = {
    "dinov2": ("Dinov2Config", "Dinov2Model", "layernorm", True, None, None, None),
    "dinov2_reg": (
        "Dinov2WithRegistersConfig",
        "Dinov2WithRegistersModel",
        "layernorm",
        True,
        "num_register_tokens",
        None,
        None,
    ),
    "dinov3": ("DINOv3ViTConfig", "DINOv3ViTModel", "norm", True, "num_register_tokens", None, None),
    "mae": ("ViTMAEConfig", "ViTMAEModel", "layernorm", True, None, None, None),
    "clip": ("CLIPVisionConfig", "CLIPVisionModel", "post_layernorm", True, None, CLIP_MEAN, CLIP_STD),
    "siglip": ("SiglipVisionConfig", "SiglipVisionModel", "post_layernorm", False, None, HALF, HALF),
}

# Named presets: (family, config overrides). Sizes follow the public model cards; weights are random
# unless a local ``pretrained`` path is given.
# ViT-B/16 at 224 px: the MAE, CLIP and SigLIP base presets share it.
_VIT_B16_224 = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    patch_size=16,
    image_size=224,
)
PRESETS = {
    "dinov2_small": (
        "dinov2",
        dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, patch_size=14, image_size=518),
    ),
    "dinov2_base": (
        "dinov2",
        dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, patch_size=14, image_size=518),
    ),
    "dinov2_small_reg": (
        "dinov2_reg",
        dict(
            hidden_size=384,
            num_hidden_layers=12,
            num_attention_heads=6,
            patch_size=14,
            image_size=518,
            num_register_tokens=4,
        ),
    ),
    "dinov3_vits16": (
        "dinov3",
        dict(
            hidden_size=384,
            num_hidden_layers=12,
            num_attention_heads=6,
            intermediate_size=1536,
            patch_size=16,
            num_register_tokens=4,
        ),
    ),
    "dinov3_vitb16": (
        "dinov3",
        dict(
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            patch_size=16,
            num_register_tokens=4,
        ),
    ),
    "mae_base": (
        "mae",
        dict(_VIT_B16_224),
    ),
    "clip_b16": (
        "clip",
        dict(_VIT_B16_224),
    ),
    "siglip_b16": (
        "siglip",
        dict(_VIT_B16_224),
    ),
}
TINY = dict(
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=2,
    intermediate_size=64,
    patch_size=16,
    image_size=64,
)


def _classes(family: str) -> tuple[type, type]:
    import transformers

    if family not in FAMILIES:
        raise UnknownNameError("transformers backbone family", family, sorted(FAMILIES))
    cfg_name, model_name = FAMILIES[family][:2]
    return getattr(transformers, cfg_name), getattr(transformers, model_name)


def _from_pretrained(model_cls: type, folder: str | os.PathLike) -> torch.nn.Module:
    """``from_pretrained`` offline; a refused pickle or non-finite weights become errors naming ``folder``."""
    try:
        model = model_cls.from_pretrained(os.fspath(folder), local_files_only=True)
    except pickle.UnpicklingError as e:  # transformers reads .bin files with weights_only=True
        raise pickle_refused(folder, e) from e
    check_finite(model.state_dict(), f"{folder} (transformers weights)")
    return model


@PROBE_BACKBONES.register_module()
class HFViTProbe(ProbeBackbone):
    """A ``transformers`` vision transformer as a probing backbone.

    Args:
        family: one of ``dinov2, dinov2_reg, dinov3, mae, clip, siglip``.
        config: config overrides (random init); ignored keys are those the config class does not know.
        pretrained: local folder (``from_pretrained``) or a ``.safetensors`` (or, through
            ``torch.load(weights_only=True)``, ``.pth``/``.pt``/``.bin``) file loaded into a model
            built from ``config`` (strict). Weights holding NaN or Inf are refused.
        checkpoint: alias of ``pretrained`` (the CLI's ``--weights``).
        img_size: unused (position embeddings are interpolated to the input grid).
    """

    def __init__(self, family: str = "dinov2", config: dict | None = None,
                 pretrained: str | os.PathLike | None = None, checkpoint: str | os.PathLike | None = None,
                 img_size: tuple[int, int] | None = None):
        super().__init__()
        cfg_cls, model_cls = _classes(family)
        self.family = family
        _, _, self.norm_attr, self.has_cls, reg_key, mean, std = FAMILIES[family]
        pretrained = pretrained or checkpoint
        if pretrained and Path(pretrained).is_dir():
            self.model = _from_pretrained(model_cls, pretrained)
            self.weights = str(pretrained)
        else:
            cfg = cfg_cls(**dict(config or {}))
            if family == "mae":
                cfg.mask_ratio = 0.0
            self.model = model_cls(cfg)
            if pretrained:
                self._load_file(pretrained)
        self.model.eval()
        c = self.model.config
        self.patch_size = int(c.patch_size)
        self.embed_dims = int(c.hidden_size)
        self.num_layers = int(c.num_hidden_layers)
        self.num_prefix = (1 if self.has_cls else 0) + (int(getattr(c, reg_key, 0) or 0) if reg_key else 0)
        if mean is not None:
            self.mean, self.std = mean, std
        if hasattr(c, "image_mean"):
            self.mean, self.std = tuple(c.image_mean), tuple(c.image_std)

    def _load_file(self, path: str | os.PathLike) -> None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such checkpoint file or folder")
        # .safetensors, or a pickle through torch.load(weights_only=True); NaN/Inf weights refused
        state = load_state_dict_file(path)
        result = self.model.load_state_dict(state, strict=False)
        bad = [
            k
            for k, v in state.items()
            if k in self.model.state_dict() and tuple(v.shape) != tuple(self.model.state_dict()[k].shape)
        ]
        if result.missing_keys or result.unexpected_keys or bad:
            raise ValueError(
                f"checkpoint {path} does not fit {self.family} config: missing "
                f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}, "
                f"wrong shape {bad[:5]}"
            )
        self.weights = str(path)

    def forward_layers(self, x: torch.Tensor, layers: list[int]) -> LayerFeatures:
        kwargs = {"output_hidden_states": True}
        if self.family in ("mae", "clip", "siglip"):
            kwargs["interpolate_pos_encoding"] = True
        if self.family == "mae":
            n = (x.shape[-2] // self.patch_size) * (x.shape[-1] // self.patch_size)
            # an increasing noise keeps the patch order (MAE shuffles tokens by argsort(noise))
            kwargs["noise"] = torch.arange(n, dtype=x.dtype, device=x.device).expand(x.shape[0], n)
        out = self.model(pixel_values=x, **kwargs)
        hidden = out.hidden_states  # embeddings, then one entry per block
        norm = getattr(self.model, self.norm_attr, None) or getattr(
            getattr(self.model, "vision_model", None), self.norm_attr, None
        )
        grid = (x.shape[-2] // self.patch_size, x.shape[-1] // self.patch_size)
        feats, cls = [], []
        for i in layers:
            h = hidden[i + 1]
            if i == self.num_layers - 1 and norm is not None:
                h = norm(h)
            feats.append(tokens_to_featmap(h[:, self.num_prefix :], grid))
            cls.append(h[:, 0])
        return feats, (cls if self.has_cls else None)

    def describe(self) -> dict:
        d = super().describe()
        d["family"] = self.family
        return d


def hf_preset(name: str, tiny: bool = False) -> dict:
    """Config dict of a named preset (``dinov2_small`` ...); ``tiny`` shrinks it for tests."""
    if name not in PRESETS:
        raise UnknownNameError("transformers preset", name, sorted(PRESETS))
    family, cfg = PRESETS[name]
    cfg = dict(cfg)
    if tiny:
        cfg.update(TINY)
        if "num_register_tokens" in PRESETS[name][1]:
            cfg["num_register_tokens"] = 4
    return dict(type="HFViTProbe", family=family, config=cfg)
