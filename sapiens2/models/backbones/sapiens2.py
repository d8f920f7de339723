"""The Sapiens2 backbone (every official arch, the 4K tokenizer variant, custom settings)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sapiens2.registry import MODELS

from .common import (
    SAPIENS2_ARCHS,
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
class Sapiens2(nn.Module):
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
        self.out_type = check_out_type(out_type)
        self.out_indices = normalize_out_indices(out_indices, self.num_layers)
        self.frozen_stages = frozen_stages
        self.init_cfg = init_cfg
        self.with_cls_token = with_cls_token
        if not with_cls_token and out_type == "cls_token":
            raise ValueError("Sapiens2: with_cls_token must be True when out_type='cls_token'")

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
        self.init_weights()
        self._frozen: list[nn.Module] = []
        if frozen_stages > 0:
            self._freeze_stages()

    # ------------------------------------------------------------------ setup
    def init_weights(self) -> None:
        """Random initialisation of the official code (truncated normal, std 0.02)."""
        for p in (self.cls_token, self.storage_tokens):
            if p is not None:
                nn.init.trunc_normal_(p, std=0.02)
        self.apply(trunc_normal_init)

    @property
    def fast_attention(self) -> bool:
        return self._fast_attention

    @fast_attention.setter
    def fast_attention(self, value: bool) -> None:
        self._fast_attention = bool(value)
        for m in self.modules():
            if hasattr(m, "fast") and not isinstance(m, Sapiens2):
                m.fast = self._fast_attention

    def _freeze_stages(self) -> None:
        if self.frozen_stages > self.num_layers:
            raise ValueError(f"frozen_stages {self.frozen_stages} exceeds the {self.num_layers} blocks")
        frozen: list = [self.patch_embed, self.cls_token, self.storage_tokens, self.tokenizer]
        frozen += list(self.blocks[: self.frozen_stages])
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
    def _embed(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        check_image_batch(x, self.in_channels)
        self.valid_input_size(x.shape[2], x.shape[3])
        tokens, hw = self.patch_embed(x)
        if self.tokenizer is not None:
            tokens, hw = self.tokenizer(tokens, hw)
        b = tokens.shape[0]
        prefix = [p.expand(b, -1, -1) for p in (self.cls_token, self.storage_tokens) if p is not None]
        if prefix:
            tokens = torch.cat(prefix + [tokens], dim=1)
        return tokens, hw

    def _run_blocks(self, x: Tensor, indices: list[int]):
        """Yield ``(index, tokens)`` after each requested block (final norm on the last one)."""
        tokens, hw = self._embed(x)
        rope = self.rope_embed(*hw)
        last_needed = max(indices)
        wanted = set(indices)
        for i, blk in enumerate(self.blocks):
            tokens = blk(tokens, rope=rope)
            if i == self.num_layers - 1 and self.ln1 is not None:
                tokens = self.ln1(tokens)
            if i in wanted:
                yield i, tokens, hw
            if i == last_needed:
                break

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """Run the backbone.

        Args:
            x: images, B x C x H x W, sides multiples of :attr:`size_multiple`.

        Returns:
            One output per out index, formatted by :attr:`out_type`.
        """
        check_out_type(self.out_type)
        if self.out_type == "cls_token" and self.cls_token is None:
            raise ValueError("out_type 'cls_token' needs with_cls_token=True")
        return tuple(
            format_tokens(t, self.out_type, hw, self.num_extra_tokens)
            for _, t, hw in self._run_blocks(x, self.out_indices)
        )

    def forward_intermediates(self, x: Tensor, indices=None) -> tuple[list[Tensor], list[Tensor]]:
        """Feature maps and CLS tokens after the chosen blocks (for probing).

        Args:
            x: images, B x C x H x W.
            indices: block indices (negatives count from the end) or an int ``n`` for the last
                ``n`` blocks; ``None`` uses :attr:`out_indices`.

        Returns:
            ``(featmaps, cls_tokens)``: lists of B x C x h x w and B x C tensors in the order of
            ``indices`` (``cls_tokens`` is empty without a CLS token). The last block's output
            has the final norm applied, as in :meth:`forward`.
        """
        order = (
            self.out_indices if indices is None else resolve_intermediate_indices(indices, self.num_layers)
        )
        found = {i: (t, hw) for i, t, hw in self._run_blocks(x, order)}
        feats = [format_tokens(found[i][0], "featmap", found[i][1], self.num_extra_tokens) for i in order]
        cls = [found[i][0][:, 0] for i in order] if self.cls_token is not None else []
        return feats, cls

    def extra_repr(self) -> str:
        return (
            f"arch={self.arch}, embed_dims={self.embed_dims}, num_layers={self.num_layers}, "
            f"rope={self.pos_embed_rope_dtype}, tokenizer={self.tokenizer is not None}"
        )
