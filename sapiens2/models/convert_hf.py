"""Translate Sapiens2 checkpoints between the official key layout and the ``transformers`` port.

The official layout is the one of ``facebookresearch/sapiens2`` (``cls_token``, ``blocks.N.attn.wq``,
a fused ``ffn.w12``, ``backbone.*`` / ``decode_head.*`` in task models). The Hugging Face layout is
the one of ``transformers.models.sapiens2`` (``embeddings.*``, ``model.layer.N.attention.q_proj``,
split ``mlp.gate_proj`` / ``mlp.up_proj``, ``model.*`` / ``decode_head.*`` / ``scale_head.*``).

The renaming rules are the ones of ``shared/reference/transformers_port_notes.md`` section 3. Two things
do not survive the trip into the port and are restored on the way back:

* ``rope_embed.periods`` (the port recomputes it from ``rope_theta``): it is recomputed from the base
  and head size in the dtype recorded in the safetensors metadata (``bfloat16`` for the official bf16-RoPE
  checkpoints, ``float32`` for fp32 RoPE), so official -> hf -> official is the identity.
* Features the port lacks are refused with a clear error: the 4K tokenizer (``tokenizer.*``), the albedo
  head, deconvolution kernels other than 4 and non-1x1 convs in the pose/seg heads, and scale MLPs with
  other than two hidden layers.

Everything the HF config needs is read off the tensor shapes (:func:`infer_official_config`), so no
arch name is needed to convert.
"""

from __future__ import annotations

import re

import torch

from sapiens2.tasks import all_tasks, task_names

TASKS = ("backbone", *task_names())
HF_CLASSES = {"backbone": "Sapiens2Model", **{t.name: t.hf_class for t in all_tasks() if t.hf_class}}
ESTIMATOR_TYPES = {t.name: (t.estimator, t.head, t.head_predictor) for t in all_tasks() if t.has_model}
ROPE_DTYPE_KEY = "sapiens2_rope_periods_dtype"
ALBEDO_REFUSAL = (
    "the transformers Sapiens2 port has no albedo model (no Sapiens2For* class and no key mapping; its "
    "head uses RMSNorm2d weights the port cannot hold), so albedo checkpoints cannot be converted"
)

# Backbone renames inside one block, official -> hf (the fused w12 is handled separately).
_BLOCK_RENAMES = [
    ("ln1.", "norm1."),
    ("ln2.", "norm2."),
    ("attn.wq.", "attention.q_proj."),
    ("attn.wk.", "attention.k_proj."),
    ("attn.wv.", "attention.v_proj."),
    ("attn.q_norm.", "attention.q_norm."),
    ("attn.k_norm.", "attention.k_norm."),
    ("attn.proj.", "attention.o_proj."),
    ("attn.gamma.weight", "layer_scale1.lambda1"),
    ("ffn.w3.", "mlp.down_proj."),
]
_TOP_RENAMES = [
    ("cls_token", "embeddings.cls_token"),
    ("storage_tokens", "embeddings.register_tokens"),
    ("patch_embed.projection.weight", "embeddings.patch_embeddings.weight"),
    ("patch_embed.projection.bias", "embeddings.patch_embeddings.bias"),
    ("ln1.weight", "norm.weight"),
]


class ConversionError(ValueError):
    """A checkpoint cannot be translated (unknown layout, feature the port lacks, bad shapes)."""


# ----------------------------------------------------------------------------- detection
def detect_layout(state_dict: dict) -> str:
    """Return ``'official'`` or ``'hf'`` from the key names; raise ConversionError otherwise."""
    keys = list(state_dict)
    if any(k in ("pos_embed", "backbone.pos_embed") for k in keys):
        raise ConversionError(
            "this is a Sapiens v1 checkpoint (learned pos_embed, LayerNorm ViT); transformers has no "
            "Sapiens v1 model, so it cannot be converted"
        )
    if any(k in ("cls_token", "backbone.cls_token") for k in keys):
        return "official"
    if any(k in ("embeddings.cls_token", "model.embeddings.cls_token") for k in keys):
        return "hf"
    sample = ", ".join(sorted(keys)[:5])
    raise ConversionError(f"not a Sapiens2 checkpoint: no cls_token key in either layout "
                          f"(first keys: {sample})")


def detect_task(state_dict: dict) -> str:
    """Guess the task ('backbone', 'pose', 'seg', 'normal', 'pointmap', 'albedo') from the keys."""
    keys = set(state_dict)
    for task, (_, _, predictor) in ESTIMATOR_TYPES.items():
        if f"decode_head.{predictor}.weight" in keys:
            return task
    if "decode_head.predictor.weight" in keys:  # hf layout: tell the heads apart by structure
        if any(k.startswith("scale_head.") for k in keys):
            return "pointmap"
        if "decode_head.input_conv.convolution.weight" in keys:
            return "normal"
        n_out = state_dict["decode_head.predictor.weight"].shape[0]
        return "pose" if n_out != 29 else "seg"
    if any(k.startswith("decode_head.") for k in keys):
        raise ConversionError("decode_head.* keys without a known predictor (conv_pose/seg/normal/...)")
    return "backbone"


# ----------------------------------------------------------------------------- backbone keys
def _backbone_official_to_hf(sd: dict, out: dict, src_prefix: str, dst_prefix: str) -> torch.dtype | None:
    periods_dtype = None
    for key, value in sd.items():
        if not key.startswith(src_prefix):
            continue
        k = key[len(src_prefix):]
        if k.startswith("tokenizer."):
            raise ConversionError(
                f"{key}: the 4K tokenizer (use_tokenizer=True) has no counterpart in the transformers port"
            )
        if k == "rope_embed.periods":
            periods_dtype = value.dtype
            continue
        m = re.match(r"blocks\.(\d+)\.(.*)$", k)
        if m:
            idx, rest = m.groups()
            base = f"{dst_prefix}model.layer.{idx}."
            if rest.startswith("ffn.w12."):
                gate, up = _split_w12(key, value)
                suffix = rest[len("ffn.w12."):]
                out[f"{base}mlp.gate_proj.{suffix}"] = gate
                out[f"{base}mlp.up_proj.{suffix}"] = up
                continue
            out[base + _rename(rest, _BLOCK_RENAMES, key)] = value
            continue
        out[dst_prefix + _rename_exact(k, _TOP_RENAMES, key)] = value
    return periods_dtype


def _backbone_hf_to_official(sd: dict, out: dict, src_prefix: str, dst_prefix: str) -> None:
    inverse_block = [(b, a) for a, b in _BLOCK_RENAMES]
    inverse_top = [(b, a) for a, b in _TOP_RENAMES]
    pending_w12: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    for key, value in sd.items():
        if not key.startswith(src_prefix) or key.startswith(f"{src_prefix}rope_embeddings."):
            continue
        k = key[len(src_prefix):]
        m = re.match(r"model\.layer\.(\d+)\.(.*)$", k)
        if m:
            idx, rest = m.groups()
            mm = re.match(r"mlp\.(gate_proj|up_proj)\.(weight|bias)$", rest)
            if mm:
                pending_w12.setdefault((idx, mm.group(2)), {})[mm.group(1)] = value
                continue
            out[f"{dst_prefix}blocks.{idx}." + _rename(rest, inverse_block, key)] = value
            continue
        out[dst_prefix + _rename_exact(k, inverse_top, key)] = value
    for (idx, kind), parts in pending_w12.items():
        if set(parts) != {"gate_proj", "up_proj"}:
            raise ConversionError(f"layer {idx}: mlp.{kind} needs both gate_proj and up_proj, "
                                  f"got {sorted(parts)}")
        # The official w12 computes [gate; up] in one matmul: gate (silu input) is the first half.
        out[f"{dst_prefix}blocks.{idx}.ffn.w12.{kind}"] = torch.cat([parts["gate_proj"], parts["up_proj"]], 0)


def _split_w12(key: str, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if value.shape[0] % 2:
        raise ConversionError(f"{key}: fused SwiGLU w12 needs an even row count, "
                              f"got shape {tuple(value.shape)}")
    half = value.shape[0] // 2
    return value[:half].clone(), value[half:].clone()


def _rename(rest: str, rules: list[tuple[str, str]], key: str) -> str:
    for src, dst in rules:
        if rest.startswith(src):
            return dst + rest[len(src):]
    raise ConversionError(f"{key}: no renaming rule for block entry {rest!r}")


def _rename_exact(k: str, rules: list[tuple[str, str]], key: str) -> str:
    for src, dst in rules:
        if k == src:
            return dst
    raise ConversionError(f"{key}: no renaming rule for backbone entry {k!r}")


# ----------------------------------------------------------------------------- head keys
def _head_rules(task: str) -> list[tuple[str, str]]:
    """Regex pairs (official, hf) for the decode head of ``task``; indices step by 3 (conv, norm, act)."""
    predictor = ESTIMATOR_TYPES[task][2]
    rules = [
        (r"decode_head\.conv_layers\.(\d+)\.(weight|bias)", "decode_head.conv_layers.{i3}.convolution.{1}"),
        (rf"decode_head\.{predictor}\.(weight|bias)", "decode_head.predictor.{0}"),
    ]
    if task in ("pose", "seg"):
        rules.append((r"decode_head\.deconv_layers\.(\d+)\.(weight|bias)",
                      "decode_head.upsample_layers.{i3}.convolution.{1}"))
    else:
        rules += [
            (r"decode_head\.input_conv\.0\.(weight|bias)", "decode_head.input_conv.convolution.{0}"),
            (r"decode_head\.upsample_blocks\.(\d+)\.0\.(weight|bias)",
             "decode_head.upsample_layers.{i}.convolution.{1}"),
        ]
    if task == "pointmap":
        rules += [
            (r"decode_head\.scale_conv_layers\.(\d+)\.(weight|bias)",
             "scale_head.conv_layers.{i3}.convolution.{1}"),
            (r"decode_head\.scale_final_layer\.1\.(weight|bias)", "scale_head.predictor.block1.layers.0.{0}"),
            (r"decode_head\.scale_final_layer\.3\.(weight|bias)", "scale_head.predictor.block2.layers.0.{0}"),
            (r"decode_head\.scale_final_layer\.5\.(weight|bias)", "scale_head.predictor.proj.{0}"),
        ]
    return rules


def _apply_head_rule(key: str, rules: list[tuple[str, str]]) -> str | None:
    for pattern, template in rules:
        m = re.fullmatch(pattern, key)
        if not m:
            continue
        groups = m.groups()
        if "{i3}" in template:
            index = int(groups[0])
            if index % 3:
                raise ConversionError(f"{key}: expected conv/norm/act triplets (index divisible by 3)")
            return template.replace("{i3}", str(index // 3)).format(*groups)
        if "{i}" in template:
            return template.replace("{i}", groups[0]).format(*groups)
        return template.format(*groups)
    return None


def _inverse_head_key(key: str, task: str) -> str | None:
    predictor = ESTIMATOR_TYPES[task][2]
    table = [
        (r"decode_head\.conv_layers\.(\d+)\.convolution\.(weight|bias)", "decode_head.conv_layers.{x3}.{1}"),
        (r"decode_head\.predictor\.(weight|bias)", f"decode_head.{predictor}.{{0}}"),
        (r"decode_head\.input_conv\.convolution\.(weight|bias)", "decode_head.input_conv.0.{0}"),
        (r"scale_head\.conv_layers\.(\d+)\.convolution\.(weight|bias)",
         "decode_head.scale_conv_layers.{x3}.{1}"),
        (r"scale_head\.predictor\.block1\.layers\.0\.(weight|bias)", "decode_head.scale_final_layer.1.{0}"),
        (r"scale_head\.predictor\.block2\.layers\.0\.(weight|bias)", "decode_head.scale_final_layer.3.{0}"),
        (r"scale_head\.predictor\.proj\.(weight|bias)", "decode_head.scale_final_layer.5.{0}"),
    ]
    if task in ("pose", "seg"):
        table.append((r"decode_head\.upsample_layers\.(\d+)\.convolution\.(weight|bias)",
                      "decode_head.deconv_layers.{x3}.{1}"))
    else:
        table.append((r"decode_head\.upsample_layers\.(\d+)\.convolution\.(weight|bias)",
                      "decode_head.upsample_blocks.{x}.0.{1}"))
    for pattern, template in table:
        m = re.fullmatch(pattern, key)
        if m:
            groups = m.groups()
            if "{x3}" in template:
                template = template.replace("{x3}", str(int(groups[0]) * 3))
            elif "{x}" in template:
                template = template.replace("{x}", groups[0])
            return template.format(*groups)
    return None


def _check_head_supported(sd: dict, task: str, layout: str) -> None:
    """Refuse official head shapes the port cannot rebuild (it hard-codes k=4 deconvs, 1x1 convs...)."""
    if task not in ("pose", "seg"):
        linears = [k for k in sd if re.fullmatch(r"decode_head\.scale_final_layer\.\d+\.weight", k)]
        if task == "pointmap" and layout == "official" and len(linears) != 3:
            raise ConversionError(
                f"pointmap scale MLP has {len(linears)} linear layers; the transformers port supports "
                "exactly 3 (two hidden layers)"
            )
        return
    for key, value in sd.items():
        if layout == "official" and re.fullmatch(r"decode_head\.deconv_layers\.\d+\.weight", key):
            if tuple(value.shape[2:]) != (4, 4):
                raise ConversionError(
                    f"{key}: deconvolution kernel {tuple(value.shape[2:])}; the transformers port builds "
                    "only kernel 4 (stride 2, padding 1) upsampling layers"
                )
        if layout == "official" and re.fullmatch(r"decode_head\.conv_layers\.\d+\.weight", key):
            if tuple(value.shape[2:]) != (1, 1):
                raise ConversionError(
                    f"{key}: {tuple(value.shape[2:])} conv; the port pads pose/seg head convs with 0, "
                    "so only 1x1 convs give the same output"
                )


# ----------------------------------------------------------------------------- public API
def official_to_hf(state_dict: dict, task: str | None = None) -> tuple[dict, dict]:
    """Rename an official-layout state dict to the ``transformers`` layout.

    Args:
        state_dict: official keys (backbone-only, or ``backbone.*`` + ``decode_head.*``).
        task: one of TASKS; detected from the keys when None.

    Returns:
        (hf_state_dict, metadata) where metadata holds the RoPE periods dtype for the way back.

    Raises:
        ConversionError: albedo, the 4K tokenizer, head shapes the port lacks, or unknown keys.
    """
    if detect_layout(state_dict) != "official":
        raise ConversionError("checkpoint is already in the transformers (hf) layout")
    task = task or detect_task(state_dict)
    if task == "albedo":
        raise ConversionError(ALBEDO_REFUSAL)
    if task not in HF_CLASSES:
        raise ConversionError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    out: dict[str, torch.Tensor] = {}
    if task == "backbone":
        periods_dtype = _backbone_official_to_hf(state_dict, out, "", "")
    else:
        stray = [k for k in state_dict if not k.startswith(("backbone.", "decode_head."))]
        if stray:
            raise ConversionError(f"task checkpoint has keys outside backbone./decode_head.: {stray[:5]}")
        periods_dtype = _backbone_official_to_hf(state_dict, out, "backbone.", "model.")
        _check_head_supported(state_dict, task, "official")
        rules = _head_rules(task)
        for key, value in state_dict.items():
            if key.startswith("decode_head."):
                new = _apply_head_rule(key, rules)
                if new is None:
                    raise ConversionError(f"{key}: no {task} head counterpart in the transformers port")
                out[new] = value
    dtype_name = str(periods_dtype or torch.float32).replace("torch.", "")
    return out, {ROPE_DTYPE_KEY: dtype_name, "sapiens2_task": task}


def hf_to_official(state_dict: dict, task: str | None = None, rope_theta: float = 100.0,
                   rope_dtype: str | torch.dtype = "bfloat16") -> dict:
    """Rename a ``transformers``-layout state dict to the official layout.

    Args:
        state_dict: hf keys (``Sapiens2Model`` or a ``Sapiens2For*`` model).
        task: one of TASKS minus albedo; detected from the keys when None.
        rope_theta: RoPE base used to recompute ``rope_embed.periods``.
        rope_dtype: dtype of the recomputed periods; 'bfloat16' marks the official bf16-RoPE setting.

    Returns:
        The official state dict, including ``rope_embed.periods``.
    """
    if detect_layout(state_dict) != "hf":
        raise ConversionError("checkpoint is already in the official layout")
    task = task or detect_task(state_dict)
    if task not in HF_CLASSES:
        raise ConversionError(ALBEDO_REFUSAL if task == "albedo" else f"unknown task {task!r}")
    src, dst = ("", "") if task == "backbone" else ("model.", "backbone.")
    out: dict[str, torch.Tensor] = {}
    if task == "backbone":
        body = {k: v for k, v in state_dict.items() if not k.startswith(("decode_head.", "scale_head."))}
        _backbone_hf_to_official(body, out, src, dst)
    else:
        _backbone_hf_to_official(state_dict, out, src, dst)
        for key, value in state_dict.items():
            if key.startswith(("decode_head.", "scale_head.")):
                new = _inverse_head_key(key, task)
                if new is None:
                    raise ConversionError(f"{key}: no official {task} head counterpart")
                out[new] = value
    head_dim = state_dict[f"{src}model.layer.0.attention.q_norm.weight"].shape[0]
    dtype = getattr(torch, rope_dtype) if isinstance(rope_dtype, str) else rope_dtype
    out[f"{dst}rope_embed.periods"] = rope_periods(rope_theta, head_dim, dtype)
    return out


def rope_periods(base: float, head_dim: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The official RoPE periods ``base ** (2 i / (head_dim / 2))`` for i < head_dim / 4, in ``dtype``."""
    i = torch.arange(head_dim // 4, dtype=dtype)
    return base ** (2 * i / (head_dim // 2))
