"""Building blocks of the Sapiens2 backbone: 2-D RoPE, grouped-query attention with QK-Norm and
LayerScale, the SwiGLU FFN, the transformer block and the 4x4-window tokenizer of the 4K model.

Parameter names follow the official checkpoints (``attn.wq``, ``attn.gamma.weight``, ``ffn.w12``, ...).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ROPE_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


class RopePositionEmbedding(nn.Module):
    """Axial 2-D rotary embedding for the patch tokens.

    Coordinates are patch centres normalised per axis to [-1, 1] from the *actual* patch grid
    ("separate" normalisation), so any input size works. The head dimension is split in four:
    the first and third quarters rotate with the row coordinate, the second and fourth with the
    column coordinate (sin/cos are tiled twice to pair element ``i`` with ``i + D/2``).

    Args:
        head_dim: per-head width (a multiple of 4).
        base: period base (100 in Sapiens2).
        dtype: ``'bf16'`` (official default: periods, coordinates, angles and sin/cos all computed in
            bfloat16) or ``'fp32'``.
    """

    def __init__(self, head_dim: int, base: float = 100.0, dtype: str = "bf16"):
        super().__init__()
        if head_dim % 4:
            raise ValueError(f"RoPE needs a head dimension divisible by 4, got {head_dim}")
        if dtype not in ROPE_DTYPES:
            raise ValueError(f"pos_embed_rope_dtype must be one of {sorted(ROPE_DTYPES)}, got {dtype!r}")
        self.head_dim = head_dim
        self.base = base
        self.rope_dtype = ROPE_DTYPES[dtype]
        quarter = head_dim // 4
        # Computed in the RoPE dtype, as the official code does; a checkpoint overwrites it anyway.
        exponent = 2 * torch.arange(quarter, dtype=self.rope_dtype) / (head_dim // 2)
        self.register_buffer("periods", base**exponent, persistent=True)

    def forward(self, h: int, w: int) -> tuple[Tensor, Tensor]:
        """Return ``(sin, cos)``, each ``h*w x head_dim`` in the RoPE dtype."""
        kw = dict(device=self.periods.device, dtype=self.rope_dtype)
        rows = torch.arange(0.5, h, **kw) / h
        cols = torch.arange(0.5, w, **kw) / w
        grid = torch.stack(torch.meshgrid(rows, cols, indexing="ij"), dim=-1).flatten(0, 1)
        grid = 2.0 * grid - 1.0  # [h*w, 2] in [-1, 1]
        periods = self.periods.to(self.rope_dtype)
        angles = (2 * math.pi) * grid[:, :, None] / periods[None, None, :]  # [h*w, 2, D/4]
        angles = angles.flatten(1, 2).tile(2)  # [h*w, D]
        return torch.sin(angles), torch.cos(angles)


def _rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rope(q: Tensor, k: Tensor, sin: Tensor, cos: Tensor) -> tuple[Tensor, Tensor]:
    """Rotate the patch-token rows of ``q`` and ``k`` (B x heads x N x D).

    The leading ``N - len(sin)`` rows (CLS and storage tokens) are not rotated, but, as in the
    official code, the whole of q and k goes through the RoPE dtype and back, so in bf16 mode the
    prefix rows are rounded to bfloat16 too.
    """
    n_prefix = q.shape[-2] - sin.shape[-2]
    if n_prefix < 0:
        raise ValueError(f"RoPE table has {sin.shape[-2]} positions but the sequence only {q.shape[-2]}")
    out = []
    for t in (q, k):
        dtype = t.dtype
        t = t.to(sin.dtype)
        patches = t[..., n_prefix:, :]
        patches = patches * cos + _rotate_half(patches) * sin
        out.append(torch.cat((t[..., :n_prefix, :], patches), dim=-2).to(dtype))
    return out[0], out[1]


class LayerScale(nn.Module):
    """Per-channel scale (``gamma.weight``)."""

    def __init__(self, dim: int, init_value: float = 1e-4):
        super().__init__()
        self.weight = nn.Parameter(torch.full((dim,), float(init_value)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.weight


class GroupedQueryAttention(nn.Module):
    """Multi-head attention with optional grouped K/V heads, QK-Norm, RoPE and LayerScale.

    Args:
        embed_dims: token width.
        num_heads: query heads.
        num_kv_heads: key/value heads (``None``: ``num_heads``); must divide ``num_heads``.
        use_qk_norm: per-head RMSNorm (eps 1e-6) on q and k, before RoPE.
        layer_scale_init_value: > 0 adds ``gamma`` (LayerScale) after the output projection.
        fast: use ``F.scaled_dot_product_attention`` with native grouped heads; otherwise an
            explicit softmax(q k^T / sqrt(d)) v with repeated K/V heads.
    """

    def __init__(
        self,
        embed_dims: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        use_qk_norm: bool = True,
        layer_scale_init_value: float = 0.0,
        qkv_bias: bool = True,
        fast: bool = True,
    ):
        super().__init__()
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads or num_heads
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_kv_heads {self.num_kv_heads} must divide num_heads {num_heads}")
        self.head_dim = embed_dims // num_heads
        kv_dims = self.num_kv_heads * self.head_dim
        self.wq = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.wk = nn.Linear(embed_dims, kv_dims, bias=qkv_bias)
        self.wv = nn.Linear(embed_dims, kv_dims, bias=qkv_bias)
        self.use_qk_norm = use_qk_norm
        if use_qk_norm:
            self.q_norm = nn.RMSNorm(self.head_dim, eps=1e-6)
            self.k_norm = nn.RMSNorm(self.head_dim, eps=1e-6)
        self.proj = nn.Linear(embed_dims, embed_dims, bias=True)
        self.gamma = LayerScale(embed_dims, layer_scale_init_value) if layer_scale_init_value > 0 else None
        self.fast = fast

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor] | None = None) -> Tensor:
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if self.use_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            q, k = apply_rope(q, k, *rope)
        grouped = self.num_kv_heads != self.num_heads
        if self.fast:
            out = F.scaled_dot_product_attention(q, k, v, enable_gqa=grouped)
        else:
            out = eager_attention(q, k, v)
        out = self.proj(out.transpose(1, 2).reshape(b, n, self.embed_dims))
        return out if self.gamma is None else self.gamma(out)


def eager_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Reference attention: K/V heads repeated to the query heads, softmax in float32."""
    repeat = q.shape[1] // k.shape[1]
    if repeat > 1:
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    weights = scores.softmax(dim=-1, dtype=torch.float32).to(v.dtype)
    return torch.matmul(weights, v)


class SwiGLUFFN(nn.Module):
    """``w3(silu(a) * b)`` with ``[a, b] = w12(x)`` (the first half is the gate)."""

    def __init__(self, embed_dims: int, hidden_dims: int):
        super().__init__()
        self.w12 = nn.Linear(embed_dims, 2 * hidden_dims, bias=True)
        self.w3 = nn.Linear(hidden_dims, embed_dims, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(gate) * up)


class Sapiens2Block(nn.Module):
    """Pre-norm block: ``x + attn(ln1(x))`` then ``x + ffn(ln2(x))`` (RMSNorm eps 1e-6)."""

    def __init__(
        self,
        embed_dims: int,
        num_heads: int,
        feedforward_channels: int,
        num_kv_heads: int | None = None,
        use_qk_norm: bool = True,
        layer_scale_init_value: float = 0.0,
        fast: bool = True,
    ):
        super().__init__()
        self.ln1 = nn.RMSNorm(embed_dims, eps=1e-6)
        self.attn = GroupedQueryAttention(
            embed_dims,
            num_heads,
            num_kv_heads=num_kv_heads,
            use_qk_norm=use_qk_norm,
            layer_scale_init_value=layer_scale_init_value,
            fast=fast,
        )
        self.ln2 = nn.RMSNorm(embed_dims, eps=1e-6)
        self.ffn = SwiGLUFFN(embed_dims, feedforward_channels)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor] | None = None) -> Tensor:
        x = x + self.attn(self.ln1(x), rope=rope)
        return x + self.ffn(self.ln2(x))


class WindowTokenizer(nn.Module):
    """The 4K model's tokenizer: attention inside each ``ws x ws`` patch window with a shared
    window CLS token and a learned local position embedding; each window's CLS output becomes
    one token, so the patch grid shrinks by ``ws`` per side.

    All windows of the batch run through the blocks as one batch (no loop over windows).

    Args:
        embed_dims: token width.
        num_heads: attention heads (full MHA, no QK-Norm, no LayerScale, no RoPE).
        num_layers: number of blocks.
        window_size: window side in patches (4).
        fast: SDPA or the eager attention path.
    """

    def __init__(self, embed_dims: int, num_heads: int, num_layers: int, window_size: int = 4, fast=True):
        super().__init__()
        self.window_size = window_size
        self.local_pos_embed = nn.Parameter(torch.zeros(1, 1 + window_size**2, embed_dims))
        self.blocks = nn.ModuleList(
            Sapiens2Block(embed_dims, num_heads, 4 * embed_dims, use_qk_norm=False, fast=fast)
            for _ in range(num_layers)
        )
        self.w_cls = nn.Parameter(torch.zeros(1, 1, embed_dims))
        nn.init.trunc_normal_(self.local_pos_embed, std=0.02)
        nn.init.trunc_normal_(self.w_cls, std=0.02)

    def forward(self, x: Tensor, hw: tuple[int, int]) -> tuple[Tensor, tuple[int, int]]:
        """Reduce ``B x (H*W) x C`` patch tokens to ``B x (H/ws * W/ws) x C`` window tokens."""
        b, _, c = x.shape
        h, w = hw
        ws = self.window_size
        if h % ws or w % ws:
            raise ValueError(f"tokenizer: patch grid {h}x{w} is not divisible by the window size {ws}")
        gh, gw = h // ws, w // ws
        windows = x.reshape(b, gh, ws, gw, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b * gh * gw, ws * ws, c)
        t = torch.cat((self.w_cls.expand(windows.shape[0], -1, -1), windows), dim=1) + self.local_pos_embed
        for blk in self.blocks:
            t = blk(t)
        return t[:, 0].reshape(b, gh * gw, c), (gh, gw)
