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
    check_image_batch,
    check_input_size,
    check_out_type,
    format_tokens,
    freeze,
    normalize_out_indices,
    resolve_arch,
    resolve_intermediate_indices,
    to_2tuple,
    trunc_normal_init,
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
class Sapiens(nn.Module):
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
        self.out_type = check_out_type(out_type)
        self.out_indices = normalize_out_indices(out_indices, self.num_layers)
        self.with_cls_token = with_cls_token
        if not with_cls_token and out_type == "cls_token":
            raise ValueError("Sapiens: with_cls_token must be True when out_type='cls_token'")
        self.num_extra_tokens = int(with_cls_token)
        self.frozen_stages = frozen_stages
        self.init_cfg = init_cfg

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
        self.init_weights()
        self._frozen: list[nn.Module] = []
        if frozen_stages > 0:
            self._freeze_stages()

    def init_weights(self) -> None:
        """Truncated-normal initialisation (std 0.02) of tokens, position embedding and linears."""
        for p in (self.cls_token, self.pos_embed):
            if p is not None:
                nn.init.trunc_normal_(p, std=0.02)
        self.apply(trunc_normal_init)

    @property
    def fast_attention(self) -> bool:
        return self._fast_attention

    @fast_attention.setter
    def fast_attention(self, value: bool) -> None:
        self._fast_attention = bool(value)
        for layer in self.layers:
            layer.attn.fast = self._fast_attention

    def _freeze_stages(self) -> None:
        if self.frozen_stages > self.num_layers:
            raise ValueError(f"frozen_stages {self.frozen_stages} exceeds the {self.num_layers} blocks")
        frozen: list = [self.patch_embed, self.cls_token, self.pos_embed]
        frozen += list(self.layers[: self.frozen_stages])
        if self.frozen_stages == self.num_layers:
            frozen.append(self.ln1)
        for m in frozen:
            freeze(m)
        self._frozen = [m for m in frozen if isinstance(m, nn.Module)]

    def train(self, mode: bool = True):
        super().train(mode)
        if mode:
            for m in self._frozen:
                m.eval()
        return self

    def valid_input_size(self, h: int, w: int) -> tuple[int, int]:
        """Check an input size; return its patch grid.

        Raises:
            ValueError: a side is not a multiple of the patch size; names the nearest valid sizes.
        """
        check_input_size(int(h), int(w), self.patch_size, f"patch size {self.patch_size}")
        return h // self.patch_size, w // self.patch_size

    def _run_blocks(self, x: Tensor, indices: list[int]):
        check_image_batch(x, self.in_channels)
        self.valid_input_size(x.shape[2], x.shape[3])
        tokens, hw = self.patch_embed(x)
        if self.cls_token is not None:
            tokens = torch.cat((self.cls_token.expand(tokens.shape[0], -1, -1), tokens), dim=1)
        tokens = tokens + resize_pos_embed(self.pos_embed, self.patch_resolution, hw, self.num_extra_tokens)
        last_needed, wanted = max(indices), set(indices)
        for i, layer in enumerate(self.layers):
            tokens = layer(tokens)
            if i == self.num_layers - 1 and self.ln1 is not None:
                tokens = self.ln1(tokens)
            if i in wanted:
                yield i, tokens, hw
            if i == last_needed:
                break

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """Run the backbone; one output per out index, formatted by :attr:`out_type`."""
        check_out_type(self.out_type)
        if self.out_type == "cls_token" and self.cls_token is None:
            raise ValueError("out_type 'cls_token' needs with_cls_token=True")
        return tuple(
            format_tokens(t, self.out_type, hw, self.num_extra_tokens)
            for _, t, hw in self._run_blocks(x, self.out_indices)
        )

    def forward_intermediates(self, x: Tensor, indices=None) -> tuple[list[Tensor], list[Tensor]]:
        """Feature maps and CLS tokens after the chosen blocks; see ``Sapiens2.forward_intermediates``."""
        order = (
            self.out_indices if indices is None else resolve_intermediate_indices(indices, self.num_layers)
        )
        found = {i: (t, hw) for i, t, hw in self._run_blocks(x, order)}
        feats = [format_tokens(found[i][0], "featmap", found[i][1], self.num_extra_tokens) for i in order]
        cls = [found[i][0][:, 0] for i in order] if self.cls_token is not None else []
        return feats, cls
