"""The Sapiens2 backbone (every official arch, the 4K tokenizer variant, custom settings)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sapiens2.registry import MODELS

from .common import (
    SAPIENS2_ARCHS,
    PatchEmbed,
    ViTBackboneBase,
    check_input_size,
    resolve_arch,
    to_2tuple,
)
from .sapiens2_layers import RopePositionEmbedding, Sapiens2Block, WindowTokenizer

# The first and the last 8 blocks use full multi-head attention; the blocks in between use
# num_heads // 2 key/value heads.
FULL_ATTENTION_FIRST = 8
FULL_ATTENTION_LAST = 8
SAPIENS2_REQUIRED = ("embed_dims", "num_layers", "num_heads", "feedforward_channels")


def kv_heads_per_layer(num_layers: int, num_heads: int) -> list[int]:
    """Key/value heads of each block (GQA in the middle layers)."""
    return [
        num_heads if i < FULL_ATTENTION_FIRST or i >= num_layers - FULL_ATTENTION_LAST else num_heads // 2
        for i in range(num_layers)
    ]


@MODELS.register_module()
class Sapiens2(ViTBackboneBase):
    """Sapiens2 ViT: RMSNorm, QK-Norm, GQA in the middle blocks, SwiGLU, LayerScale on the
    attention branch, 2-D RoPE on patch tokens, a CLS token and storage (register) tokens.

    Args:
        arch: an official arch name (see :func:`list_archs`) or a settings dict with
            ``embed_dims``, ``num_layers``, ``num_heads``, ``feedforward_channels`` (and
            ``num_tokenizer_layers`` when ``use_tokenizer``).
        img_size: nominal input size (H, W); only bookkeeping, any valid size runs.
        patch_size: patch side in pixels.
        in_channels: image channels.
        out_indices: block index or indices to output (negative counts from the end).
        out_type: ``'raw'`` (B x (1+S+N) x C), ``'featmap'`` (B x C x h x w) or ``'cls_token'``.
        with_cls_token: prepend the CLS token.
        final_norm: RMSNorm (``ln1``) after the last block.
        use_tokenizer: the 4K model's 4x4-window tokenizer before the blocks.
        frozen_stages: freeze the patch embedding, tokens, tokenizer and the first N blocks
            (and ``ln1`` when N equals the number of blocks).
        pos_embed_rope_dtype: ``'bf16'`` (as the official checkpoints were trained) or ``'fp32'``.
        n_storage_tokens: number of storage tokens after the CLS token.
        fast_attention: SDPA with native grouped K/V heads; ``False`` uses eager attention.
        init_cfg: accepted for mmengine configs; unused (load weights with the checkpoint tools).
        layer_scale_init_value: initial LayerScale value.
        window_size: tokenizer window side in patches.
    """

    def __init__(
        self,
        arch: str | dict = "sapiens2_1b",
        img_size=(1024, 768),
        patch_size: int = 16,
        in_channels: int = 3,
        out_indices=-1,
        out_type: str = "featmap",
        with_cls_token: bool = True,
        final_norm: bool = True,
        use_tokenizer: bool = False,
        frozen_stages: int = -1,
        pos_embed_rope_dtype: str = "bf16",
        n_storage_tokens: int = 8,
        fast_attention: bool = True,
        init_cfg: dict | None = None,
        layer_scale_init_value: float = 1e-4,
        window_size: int = 4,
    ):
        super().__init__()
        required = SAPIENS2_REQUIRED + (("num_tokenizer_layers",) if use_tokenizer else ())
        self.arch_settings = resolve_arch(arch, SAPIENS2_ARCHS, required, "Sapiens2")
        self.arch = arch if isinstance(arch, str) else "custom"
        s = self.arch_settings
        self.embed_dims = s["embed_dims"]
        self.num_layers = s["num_layers"]
        self.num_heads = s["num_heads"]
        head_dim = self.embed_dims // self.num_heads
        if head_dim % 4:
            raise ValueError(
                f"Sapiens2: embed_dims / num_heads = {head_dim} must be divisible by 4 (2-D RoPE)"
            )
        kv_heads = kv_heads_per_layer(self.num_layers, self.num_heads)
        if min(kv_heads) < 1 or any(self.num_heads % k for k in kv_heads):
            raise ValueError(f"Sapiens2: num_heads {self.num_heads} cannot be halved for the GQA blocks")
        self.img_size = to_2tuple(img_size)
        self.patch_size = int(patch_size)
        self.in_channels = in_channels
        self.window_size = window_size if use_tokenizer else 1
        self._init_outputs("Sapiens2", out_type, out_indices, with_cls_token, frozen_stages, init_cfg)

        self.patch_embed = PatchEmbed(in_channels, self.embed_dims, self.patch_size)
        self.rope_embed = RopePositionEmbedding(head_dim, base=100.0, dtype=pos_embed_rope_dtype)
        self.pos_embed_rope_dtype = pos_embed_rope_dtype
        self.tokenizer = (
            WindowTokenizer(self.embed_dims, self.num_heads, s["num_tokenizer_layers"], window_size)
            if use_tokenizer
            else None
        )
        # Token grid the blocks see at img_size (bookkeeping; any valid input size runs).
        self.patch_resolution = self.valid_input_size(*self.img_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims)) if with_cls_token else None
        self.n_storage_tokens = int(n_storage_tokens)
        self.storage_tokens = (
            nn.Parameter(torch.zeros(1, self.n_storage_tokens, self.embed_dims))
            if self.n_storage_tokens > 0
            else None
        )
        self.num_extra_tokens = int(with_cls_token) + self.n_storage_tokens
        self.blocks = nn.Sequential(
            *(
                Sapiens2Block(
                    self.embed_dims,
                    self.num_heads,
                    s["feedforward_channels"],
                    num_kv_heads=kv_heads[i],
                    layer_scale_init_value=layer_scale_init_value,
                )
                for i in range(self.num_layers)
            )
        )
        self.final_norm = final_norm
        self.ln1 = nn.RMSNorm(self.embed_dims, eps=1e-6) if final_norm else None
        self.fast_attention = fast_attention
        self._finish_init()

    # ------------------------------------------------------------------ setup
    def _stem(self) -> list:
        return [self.patch_embed, self.cls_token, self.storage_tokens, self.tokenizer]

    def _block_list(self) -> nn.Sequential:
        return self.blocks

    # ------------------------------------------------------------------ sizes
    @property
    def size_multiple(self) -> int:
        """Input sides must be multiples of this (patch size, times 4 with the tokenizer)."""
        return self.patch_size * self.window_size

    def valid_input_size(self, h: int, w: int) -> tuple[int, int]:
        """Check an input size; return the token grid (h, w) the blocks see.

        Raises:
            ValueError: a side is not a multiple of :attr:`size_multiple`; names the nearest
                valid sizes.
        """
        what = f"patch size {self.patch_size}"
        if self.tokenizer is not None:
            what += f" x tokenizer window {self.window_size}"
        check_input_size(int(h), int(w), self.size_multiple, what)
        return h // self.size_multiple, w // self.size_multiple

    # ------------------------------------------------------------------ forward
    def _embed_tokens(self, x: Tensor) -> tuple[Tensor, tuple[int, int], dict]:
        tokens, hw = self.patch_embed(x)
        if self.tokenizer is not None:
            tokens, hw = self.tokenizer(tokens, hw)
        b = tokens.shape[0]
        prefix = [p.expand(b, -1, -1) for p in (self.cls_token, self.storage_tokens) if p is not None]
        if prefix:
            tokens = torch.cat(prefix + [tokens], dim=1)
        return tokens, hw, {"rope": self.rope_embed(*hw)}

    def extra_repr(self) -> str:
        return (
            f"arch={self.arch}, embed_dims={self.embed_dims}, num_layers={self.num_layers}, "
            f"rope={self.pos_embed_rope_dtype}, tokenizer={self.tokenizer is not None}"
        )
