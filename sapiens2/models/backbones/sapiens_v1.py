"""The Sapiens (v1) backbone: a plain pre-norm ViT with LayerNorm, fused ``qkv`` attention, a GELU
MLP and a learned absolute position embedding (mmpretrain key layout, ``layers.N.*``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sapiens2.registry import MODELS

from .common import (
    SAPIENS_V1_ARCHS,
    PatchEmbed,
    ViTBackboneBase,
    check_input_size,
    resolve_arch,
    to_2tuple,
)
from .sapiens2_layers import eager_attention

V1_REQUIRED = ("embed_dims", "num_layers", "num_heads", "feedforward_channels")


class FusedQKVAttention(nn.Module):
    """Multi-head self-attention with one ``qkv`` projection (rows ordered q, k, v)."""

    def __init__(self, embed_dims: int, num_heads: int, fast: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dims // num_heads
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims, bias=True)
        self.proj = nn.Linear(embed_dims, embed_dims, bias=True)
        self.fast = fast

    def forward(self, x: Tensor) -> Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v) if self.fast else eager_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class GeluMLP(nn.Module):
    """``Linear -> GELU -> Linear`` under the mmpretrain names ``layers.0.0`` and ``layers.1``."""

    def __init__(self, embed_dims: int, hidden_dims: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Sequential(nn.Linear(embed_dims, hidden_dims), nn.GELU()),
            nn.Linear(hidden_dims, embed_dims),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


class ViTBlock(nn.Module):
    """Pre-norm ViT block with LayerNorm (eps 1e-6)."""

    def __init__(self, embed_dims: int, num_heads: int, hidden_dims: int, fast: bool = True):
        super().__init__()
        self.ln1 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.attn = FusedQKVAttention(embed_dims, num_heads, fast=fast)
        self.ln2 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.ffn = GeluMLP(embed_dims, hidden_dims)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


def resize_pos_embed(pos_embed: Tensor, src: tuple[int, int], dst: tuple[int, int], n_prefix: int) -> Tensor:
    """Resize the patch part of a ``1 x (prefix + h*w) x C`` position embedding bicubically
    (align_corners=False) from grid ``src`` to ``dst``; the prefix (CLS) rows are kept as they are."""
    if tuple(src) == tuple(dst):
        return pos_embed
    prefix, grid = pos_embed[:, :n_prefix], pos_embed[:, n_prefix:]
    c = grid.shape[-1]
    grid = grid.reshape(1, src[0], src[1], c).permute(0, 3, 1, 2)
    grid = F.interpolate(grid.float(), size=dst, mode="bicubic", align_corners=False).to(pos_embed.dtype)
    return torch.cat((prefix, grid.flatten(2).transpose(1, 2)), dim=1)


@MODELS.register_module()
class Sapiens(ViTBackboneBase):
    """Sapiens v1 ViT (archs ``sapiens_0.3b``, ``0.6b``, ``1b``, ``2b`` or a settings dict).

    Args:
        arch: arch name or dict with ``embed_dims``, ``num_layers``, ``num_heads``,
            ``feedforward_channels``.
        img_size: the size (H, W) the position embedding is learned for; other inputs get it
            resized bicubically to their patch grid.
        patch_size: patch side in pixels.
        out_indices: block index or indices to output.
        out_type: ``'raw'``, ``'featmap'`` or ``'cls_token'``.
        with_cls_token: prepend the CLS token (and its position embedding row).
        final_norm: LayerNorm ``ln1`` after the last block.
        frozen_stages: freeze patch embedding, tokens, position embedding and the first N blocks.
        in_channels: image channels.
        fast_attention: SDPA (``True``) or the eager attention path.
        init_cfg: accepted for mmengine configs; unused.
    """

    def __init__(
        self,
        arch: str | dict = "sapiens_1b",
        img_size=(1024, 768),
        patch_size: int = 16,
        out_indices=-1,
        out_type: str = "featmap",
        with_cls_token: bool = True,
        final_norm: bool = True,
        frozen_stages: int = -1,
        in_channels: int = 3,
        fast_attention: bool = True,
        init_cfg: dict | None = None,
    ):
        super().__init__()
        self.arch_settings = resolve_arch(arch, SAPIENS_V1_ARCHS, V1_REQUIRED, "Sapiens")
        self.arch = arch if isinstance(arch, str) else "custom"
        s = self.arch_settings
        self.embed_dims = s["embed_dims"]
        self.num_layers = s["num_layers"]
        self.patch_size = int(patch_size)
        self.in_channels = in_channels
        self.img_size = to_2tuple(img_size)
        check_input_size(*self.img_size, self.patch_size, f"img_size vs patch size {self.patch_size}")
        self.patch_resolution = (self.img_size[0] // self.patch_size, self.img_size[1] // self.patch_size)
        self._init_outputs("Sapiens", out_type, out_indices, with_cls_token, frozen_stages, init_cfg)
        self.num_extra_tokens = int(with_cls_token)

        self.patch_embed = PatchEmbed(in_channels, self.embed_dims, self.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims)) if with_cls_token else None
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + self.num_extra_tokens, self.embed_dims))
        self.layers = nn.ModuleList(
            ViTBlock(self.embed_dims, s["num_heads"], s["feedforward_channels"], fast=fast_attention)
            for _ in range(self.num_layers)
        )
        self.final_norm = final_norm
        self.ln1 = nn.LayerNorm(self.embed_dims, eps=1e-6) if final_norm else None
        self.fast_attention = fast_attention
        self._finish_init()

    def _stem(self) -> list:
        return [self.patch_embed, self.cls_token, self.pos_embed]

    def _block_list(self) -> nn.ModuleList:
        return self.layers

    def valid_input_size(self, h: int, w: int) -> tuple[int, int]:
        """Check an input size; return its patch grid.

        Raises:
            ValueError: a side is not a multiple of the patch size; names the nearest valid sizes.
        """
        check_input_size(int(h), int(w), self.patch_size, f"patch size {self.patch_size}")
        return h // self.patch_size, w // self.patch_size

    def _embed_tokens(self, x: Tensor) -> tuple[Tensor, tuple[int, int], dict]:
        tokens, hw = self.patch_embed(x)
        if self.cls_token is not None:
            tokens = torch.cat((self.cls_token.expand(tokens.shape[0], -1, -1), tokens), dim=1)
        tokens = tokens + resize_pos_embed(self.pos_embed, self.patch_resolution, hw, self.num_extra_tokens)
        return tokens, hw, {}
