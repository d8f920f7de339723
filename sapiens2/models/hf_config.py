"""Configs for checkpoint conversion: an official config read off tensor shapes, and the matching
``transformers`` ``Sapiens2Config`` (so ``from_pretrained(folder)`` works offline)."""

from __future__ import annotations

import re
from typing import Any

import torch

from sapiens2.image_norm import MEAN, STD
from sapiens2.models.convert_hf import (
    ALBEDO_REFUSAL,
    ESTIMATOR_TYPES,
    HF_CLASSES,
    ConversionError,
    detect_task,
    rope_periods,
)
from sapiens2.models.variants import variants


def rope_base_from_periods(periods: torch.Tensor, head_dim: int) -> float:
    """Recover the RoPE base of stored periods: 100 (the official base) when they equal its periods in
    their own dtype, else ``periods[1] ** (head_dim / 4)``."""
    if torch.equal(rope_periods(100.0, head_dim, periods.dtype), periods) or periods.numel() < 2:
        return 100.0
    return float(periods[1].double()) ** (head_dim / 4)


def infer_official_config(state_dict: dict, task: str | None = None,
                          img_size: tuple[int, int] = (1024, 768)) -> dict:
    """Read an official-style config dict off the tensor shapes of an official state dict.

    Args:
        state_dict: official-layout keys.
        task: detected when None.
        img_size: (H, W) written into the backbone config (not recoverable from weights).

    Returns:
        ``{"type": "Sapiens2", "arch": {settings}, ...}`` for a backbone, else an estimator config with
        ``backbone`` and ``decode_head``. Buildable with ``sapiens2.models.builder.build_model``.

    Raises:
        ConversionError: a key/value-head layout other than the official one.
    """
    task = task or detect_task(state_dict)
    p = "" if task == "backbone" else "backbone."
    embed = state_dict[f"{p}cls_token"].shape[-1]
    block = re.compile(rf"{re.escape(p)}blocks\.(\d+)\.")
    layers = 1 + max(int(m.group(1)) for k in state_dict if (m := block.match(k)))
    head_dim = state_dict[f"{p}blocks.0.attn.q_norm.weight"].shape[0]
    ffn = state_dict[f"{p}blocks.0.ffn.w3.weight"].shape[1]
    kv = [state_dict[f"{p}blocks.{i}.attn.wk.weight"].shape[0] // head_dim for i in range(layers)]
    heads = embed // head_dim
    settings = {"embed_dims": embed, "num_layers": layers, "num_heads": heads,
                "feedforward_channels": ffn}
    tok = [k for k in state_dict if k.startswith(f"{p}tokenizer.blocks.") and k.endswith(".ln1.weight")]
    if tok:
        settings["num_tokenizer_layers"] = len(tok)
    backbone = {"type": "Sapiens2", "arch": settings, "img_size": list(img_size), "patch_size":
                state_dict[f"{p}patch_embed.projection.weight"].shape[-1],
                "use_tokenizer": bool(tok), "n_storage_tokens": state_dict[f"{p}storage_tokens"].shape[1]}
    standard = [heads if (i < 8 or i >= layers - 8) else heads // 2 for i in range(layers)]
    if kv != standard:
        raise ConversionError(f"key/value heads per layer {kv} differ from the official layout {standard} "
                              "(full attention in the first and last 8 blocks, num_heads // 2 in between)")
    periods = state_dict.get(f"{p}rope_embed.periods")
    if periods is not None:
        backbone["pos_embed_rope_dtype"] = "bf16" if periods.dtype == torch.bfloat16 else "fp32"
        base = rope_base_from_periods(periods, head_dim)
        if abs(base - 100.0) > 1e-3:
            backbone["pos_embed_rope_base"] = base
    if task == "backbone":
        return backbone
    backbone["out_type"] = "featmap"
    return {"type": ESTIMATOR_TYPES[task][0], "backbone": backbone,
            "decode_head": _infer_head(state_dict, task, embed)}


def _convs(sd: dict, pattern: str) -> list[torch.Tensor]:
    found = sorted(((int(m.group(1)), v) for k, v in sd.items() if (m := re.fullmatch(pattern, k))))
    return [v for _, v in found]


def _infer_head(sd: dict, task: str, embed: int) -> dict:
    head: dict[str, Any] = {"type": ESTIMATOR_TYPES[task][1], "in_channels": embed}
    convs = _convs(sd, r"decode_head\.conv_layers\.(\d+)\.weight")
    head["conv_out_channels"] = [w.shape[0] for w in convs]
    head["conv_kernel_sizes"] = [w.shape[-1] for w in convs]
    predictor = sd[f"decode_head.{ESTIMATOR_TYPES[task][2]}.weight"]
    if task in ("pose", "seg"):
        deconvs = _convs(sd, r"decode_head\.deconv_layers\.(\d+)\.weight")
        # ConvTranspose2d weights are in x out x k x k.
        head["deconv_out_channels"] = [w.shape[1] for w in deconvs]
        head["deconv_kernel_sizes"] = [w.shape[-1] for w in deconvs]
        head["out_channels" if task == "pose" else "num_classes"] = predictor.shape[0]
        return head
    ups = _convs(sd, r"decode_head\.upsample_blocks\.(\d+)\.0\.weight")
    head["upsample_channels"] = [w.shape[0] // 4 for w in ups]  # pixel shuffle x2 divides channels by 4
    if any(w.shape[-1] != 3 for w in ups):
        raise ConversionError(f"pixel-shuffle upsampling kernels {[w.shape[-1] for w in ups]}; the official "
                              "heads use 3x3")
    if task == "pointmap":
        scale = _convs(sd, r"decode_head\.scale_conv_layers\.(\d+)\.weight")
        head["scale_conv_out_channels"] = [w.shape[0] for w in scale]
        head["scale_conv_kernel_sizes"] = [w.shape[-1] for w in scale]
        lin = _convs(sd, r"decode_head\.scale_final_layer\.(\d+)\.weight")
        head["scale_final_layer"] = [lin[0].shape[1]] + [w.shape[0] for w in lin]
    return head


def hf_config_from_official(cfg: dict, task: str | None = None):
    """Build a ``transformers`` ``Sapiens2Config`` equivalent to an official config.

    Args:
        cfg: an official backbone constructor dict (``type: Sapiens2``) or an estimator config dict, with
            ``arch`` as a settings dict (see :func:`infer_official_config`) or an official arch name.
        task: overrides the task implied by ``cfg['type']``.

    Returns:
        ``Sapiens2Config`` with ``architectures`` set to the matching ``Sapiens2For*`` class.
    """
    # transformers (a Sapiens2 build of it) is imported only when a model is converted: heavy to load
    from transformers.models.sapiens2 import Sapiens2Config

    if task is None:
        types = {v[0]: t for t, v in ESTIMATOR_TYPES.items()}
        task = types.get(cfg.get("type"), "backbone")
    if task == "albedo":
        raise ConversionError(ALBEDO_REFUSAL)
    backbone = cfg if task == "backbone" else cfg["backbone"]
    if backbone.get("use_tokenizer"):
        raise ConversionError("use_tokenizer=True (4K model): the transformers port has no tokenizer stage")
    settings = _arch_settings(backbone["arch"])
    heads = settings["num_heads"]
    layers = settings["num_layers"]
    kv = [heads if (i < 8 or i >= layers - 8) else heads // 2 for i in range(layers)]
    img = backbone.get("img_size", (1024, 768))
    img = list(img) if isinstance(img, (list, tuple)) else [img, img]
    kwargs: dict[str, Any] = dict(
        hidden_size=settings["embed_dims"], num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=settings["feedforward_channels"], num_key_value_heads_per_layer=kv,
        image_size=img, patch_size=backbone.get("patch_size", 16),
        num_register_tokens=backbone.get("n_storage_tokens", 8),
        rope_theta=float(backbone.get("pos_embed_rope_base", 100.0)), layerscale_value=1e-4,
        pos_embed_rescale=None, rms_norm_eps=1e-6, use_qk_norm=True, use_gated_mlp=True, hidden_act="silu",
    )
    if task != "backbone":
        head_cfg, num_labels = _hf_head_config(cfg["decode_head"], task)
        kwargs["head_config"] = head_cfg
        kwargs["num_labels"] = num_labels
    config = Sapiens2Config(**kwargs)
    config.architectures = [HF_CLASSES[task]]
    return config


def _arch_settings(arch) -> dict:
    if isinstance(arch, dict):
        return arch
    archs = {v.name: v for v in variants("sapiens2", official=True)}
    if arch not in archs:
        raise KeyError(f"unknown arch {arch!r}; known archs: {', '.join(sorted(archs))}")
    return dict(archs[arch].settings)


def _hf_head_config(head: dict, task: str) -> tuple[dict, int]:
    if task in ("pose", "seg"):
        kernels = list(head.get("deconv_kernel_sizes") or [4] * len(head["deconv_out_channels"]))
        convk = list(head.get("conv_kernel_sizes") or [1] * len(head.get("conv_out_channels", [])))
        if any(k != 4 for k in kernels) or any(k != 1 for k in convk):
            raise ConversionError(
                f"{task} head with deconv kernels {kernels} and conv kernels {convk}: the transformers port "
                "reproduces only kernel-4 deconvs and 1x1 convs"
            )
        labels = head["out_channels"] if task == "pose" else head["num_classes"]
        out = dict(upsample_out_channels=list(head["deconv_out_channels"]), upsample_kernel_sizes=kernels,
                   conv_out_channels=list(head.get("conv_out_channels", [])), conv_kernel_sizes=convk)
        return out, labels
    ups = list(head["upsample_channels"])
    convs = list(head.get("conv_out_channels", []))
    out = dict(use_pixel_shuffle=True, upsample_out_channels=ups,
               upsample_kernel_sizes=[3] * len(ups),  # the official pixel-shuffle blocks use 3x3 convs
               conv_out_channels=convs,
               conv_kernel_sizes=list(head.get("conv_kernel_sizes") or [1] * len(convs)))
    if task == "pointmap":
        final = list(head["scale_final_layer"])
        if len(final) != 4 or final[-1] != 1:
            raise ConversionError(
                f"scale_final_layer {final}: the transformers port supports [in, hidden1, hidden2, 1] only"
            )
        out.update(scale_conv_out_channels=list(head["scale_conv_out_channels"]),
                   scale_conv_kernel_sizes=list(head.get("scale_conv_kernel_sizes")
                                                or [1] * len(head["scale_conv_out_channels"])),
                   scale_final_input_size=final[0], scale_final_hidden_sizes=final[1:3])
    return out, 3


def hf_preprocessor_config(image_size) -> dict:
    """The ``preprocessor_config.json`` of a converted model, so ``AutoImageProcessor`` loads the folder.

    The same input policy as our pipelines (:data:`sapiens2.image_norm.MEAN`/``STD``, in 0-255 units):
    resize to ``image_size`` (H, W), rescale by 1/255, normalise with the mean and std over 255.

    Example:
        >>> cfg = hf_preprocessor_config((1024, 768))
        >>> cfg["image_processor_type"], cfg["size"], [round(m, 3) for m in cfg["image_mean"]]
        ('Sapiens2ImageProcessor', {'height': 1024, 'width': 768}, [0.485, 0.456, 0.406])
    """
    h, w = (int(v) for v in image_size)
    return {
        "image_processor_type": "Sapiens2ImageProcessor",
        "do_resize": True,
        "size": {"height": h, "width": w},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [m / 255 for m in MEAN],
        "image_std": [s / 255 for s in STD],
    }
