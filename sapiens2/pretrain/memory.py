"""The memory a pretraining config needs, by arithmetic from its arch settings, checked before any work.

Counted from the config alone (no model is built; the meta-device build of a 1B model takes ~50 s):

* parameters: the linear, convolution and token weights of the student backbone (Sapiens2 blocks with
  GQA in the middle layers and a SwiGLU FFN), the MAE decoder (when ``loss_weights.mae > 0``) and the
  DINO head (when ``loss_weights.cl > 0``); biases and norm gains are left out (< 0.1 %);
* the **firm part**, a lower bound: 16 bytes per trained parameter (fp32 weights, gradients and the
  two AdamW moments; ``precision: bf16`` autocasts the compute, the weights stay fp32) plus 4 bytes per
  EMA-teacher parameter (backbone + head);
* **activations**, a rough figure only: per student token and block, ``10 * embed_dims + 3 *
  feedforward_channels`` values kept for the backward pass (2 bytes each under bf16, 4 under fp32), over
  the visible tokens of the global views and all tokens of the local views, at ``batch_size``.

:func:`check_memory` refuses a run whose firm part alone exceeds the device's free memory, so a refusal
is never a false alarm; the message names the recipe, both figures and what it needs.

Example:
    >>> from sapiens2.pretrain.recipes import get_recipe
    >>> est = estimate_memory(get_recipe("paper_1b"))
    >>> round(est.trained_params / 1e9, 2), format_bytes(est.firm_bytes)
    (1.51, '28.1 GiB')
"""

from __future__ import annotations

from dataclasses import dataclass

from sapiens2.errors import BenchError
from sapiens2.memory import available_memory, format_bytes
from sapiens2.models.backbones.common import SAPIENS2_ARCHS, resolve_arch
from sapiens2.models.backbones.sapiens2 import SAPIENS2_REQUIRED, kv_heads_per_layer

_BLOCK_ACTIVATIONS = (10, 3)  # kept values per token and block: 10 x width + 3 x FFN width


@dataclass(frozen=True)
class MemoryEstimate:
    """What a pretraining config needs on one rank (bytes)."""

    trained_params: int
    teacher_params: int
    firm_bytes: int  # weights, gradients, AdamW moments, EMA teacher: a lower bound
    activation_bytes: int  # rough, at the config's batch size and precision

    @property
    def total_bytes(self) -> int:
        """Firm part plus the activation figure."""
        return self.firm_bytes + self.activation_bytes


def _block_params(d: int, ffn: int, kv_dims: int) -> int:
    return 2 * d * d + 2 * d * kv_dims + 3 * d * ffn  # wq, proj, wk, wv; SwiGLU w12 (2 x ffn) and w3


def _backbone(cfg: dict) -> tuple[dict, int, int, int] | None:
    """(arch settings, patch, extra tokens, parameters) of a Sapiens2 backbone config, else ``None``."""
    bb = cfg["model"]["backbone"]
    if bb.get("type") != "Sapiens2":
        return None
    try:
        s = resolve_arch(bb.get("arch", "sapiens2_1b"), SAPIENS2_ARCHS, SAPIENS2_REQUIRED, "Sapiens2")
    except ValueError:
        return None  # the build names the bad arch
    d, heads, patch = s["embed_dims"], s["num_heads"], int(bb.get("patch_size", 16))
    head_dim = d // heads
    params = sum(_block_params(d, s["feedforward_channels"], kv * head_dim)
                 for kv in kv_heads_per_layer(s["num_layers"], heads))
    extra = int(bb.get("with_cls_token", True)) + int(bb.get("n_storage_tokens", 8))
    params += 3 * patch * patch * d + extra * d
    return s, patch, extra, params


def estimate_memory(cfg: dict) -> MemoryEstimate | None:
    """The :class:`MemoryEstimate` of a resolved pretraining config; ``None`` for a non-Sapiens2 backbone."""
    found = _backbone(cfg)
    if found is None:
        return None
    s, patch, extra, backbone = found
    d, ffn, model = s["embed_dims"], s["feedforward_channels"], cfg["model"]
    weights = {"mae": 1.0, "cl": 0.4, "koleo": 0.04, **(model.get("loss_weights") or {})}
    dec, head = model["decoder"], model["head"]
    decoder = head_params = 0
    if weights["mae"] > 0:
        e = int(dec.get("embed_dims", 512))
        ffn_dec = int(e * float(dec.get("ffn_ratio", 4.0)))
        decoder = d * e + int(dec.get("num_layers", 8)) * _block_params(e, ffn_dec, e) + e * patch * patch * 3
    if weights["cl"] > 0:
        layers = int(head.get("num_layers", 3))
        hidden, bottleneck = int(head.get("hidden_dim", 2048)), int(head.get("bottleneck_dim", 256))
        dims = [d] + [hidden] * (layers - 1) + [bottleneck]
        head_params = sum(a * b for a, b in zip(dims, dims[1:])) + int(head.get("out_dim", 65536)) * dims[-1]
    trained = backbone + decoder + head_params
    teacher = backbone + head_params if weights["cl"] > 0 else 0

    crops, value_bytes = cfg["crops"], 2 if cfg["precision"] == "bf16" else 4
    grid = (crops["global_size"][0] // patch) * (crops["global_size"][1] // patch)
    local = (crops["local_size"][0] // patch) * (crops["local_size"][1] // patch)
    kept = 1.0 - float(model["masking"].get("ratio", 0.75)) if weights["mae"] > 0 else 1.0
    n_global = int(model.get("n_global", 2))
    tokens = n_global * (int(grid * kept) + extra) + int(crops["n_local"]) * (local + extra)
    per_token = (_BLOCK_ACTIVATIONS[0] * d + _BLOCK_ACTIVATIONS[1] * ffn) * s["num_layers"]
    if weights["mae"] > 0:
        e = int(dec.get("embed_dims", 512))
        dec_values = n_global * grid * int(dec.get("num_layers", 8)) * (10 * e + 12 * e)
    else:
        dec_values = 0
    activations = cfg["batch_size"] * (tokens * per_token + dec_values) * value_bytes
    return MemoryEstimate(trained, teacher, 16 * trained + 4 * teacher, int(activations))


def device_free_memory(device: str) -> int | None:
    """Free bytes on ``device`` (CUDA: ``torch.cuda.mem_get_info``; CPU: :func:`available_memory`)."""
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None  # the device resolver says so
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    return available_memory()


def check_memory(cfg: dict, device: str = "cpu") -> MemoryEstimate | None:
    """Refuse a pretraining config whose weights, gradients and optimiser state alone exceed ``device``'s
    free memory.

    Raises:
        BenchError: naming the config, its parameter count, the firm and activation figures, the free
        memory, and (on a CPU) that it needs a GPU with that much memory.
    """
    est = estimate_memory(cfg)
    free = device_free_memory(device)
    if est is None or free is None or est.firm_bytes <= free:
        return est
    on_cpu = not str(device).startswith("cuda")
    need = (f"Run it on a GPU (--device cuda) with at least {format_bytes(est.total_bytes)} free"
            if on_cpu else f"It needs a GPU with at least {format_bytes(est.total_bytes)} free")
    firm, acts = format_bytes(est.firm_bytes), format_bytes(est.activation_bytes)
    raise BenchError(
        f"pretraining config {cfg.get('name', 'custom')!r} does not fit on {device}: "
        f"{est.trained_params / 1e9:.2f}B trained parameters need {firm} for weights, "
        f"gradients, AdamW state and the EMA teacher alone, plus roughly {acts} of activations at "
        f"batch_size {cfg['batch_size']} ({cfg['precision']}); {format_bytes(free)} free on {device}. "
        f"{need}, or pick a smaller recipe (--list-recipes)."
    )
