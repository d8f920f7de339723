"""Run a Sapiens2 backbone on the visible tokens only (the MAE encoder pass).

The backbone embeds every patch (and, for the 4K model, runs the tokenizer's windowed local stage),
then the masked tokens are dropped: the global blocks see the CLS and storage tokens plus the
visible grid tokens, each with its own RoPE position. For the 4K model the mask is drawn on the
tokenizer's output grid (one token per 4x4-patch window), so masking happens after the local stage
and nothing leaks across masked windows.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sapiens2.models.backbones.sapiens2 import Sapiens2


def check_backbone(backbone: nn.Module, what: str = "backbone") -> None:
    """Reject backbones the pretraining objective cannot drive.

    Raises:
        ValueError: not a Sapiens2 backbone, or one without a CLS token.
    """
    if not isinstance(backbone, Sapiens2):
        raise ValueError(f"{what}: pretraining needs a Sapiens2 backbone, got {type(backbone).__name__}")
    if backbone.cls_token is None:
        raise ValueError(f"{what}: the [CLS] self-distillation needs with_cls_token=True")
    if backbone.frozen_stages > 0:
        raise ValueError(f"{what}: frozen_stages={backbone.frozen_stages}; pretraining trains every stage")


def token_grid(backbone: nn.Module, size: tuple[int, int]) -> tuple[int, int]:
    """The (h, w) grid the backbone's blocks see for an input of ``size`` (checked)."""
    return backbone.valid_input_size(int(size[0]), int(size[1]))


def encode(backbone: nn.Module, images: Tensor, ids_keep: Tensor | None = None) -> tuple[Tensor, tuple]:
    """Encode images, optionally keeping only some grid tokens.

    Args:
        backbone: a Sapiens2 backbone.
        images: B x 3 x H x W.
        ids_keep: B x K indices (row-major on the blocks' token grid) of the tokens to keep;
            ``None`` keeps all.

    Returns:
        ``(tokens, (h, w))``: B x (prefix + K) x C after the final norm (prefix = CLS and storage
        tokens) and the full token grid.
    """
    backbone.valid_input_size(images.shape[2], images.shape[3])
    tokens, hw, kwargs = backbone._embed_tokens(images)
    if ids_keep is not None:
        p = backbone.num_extra_tokens
        if ids_keep.shape[0] != images.shape[0]:
            raise ValueError(f"ids_keep has {ids_keep.shape[0]} rows for {images.shape[0]} images")
        grid = tokens[:, p:]
        index = ids_keep.to(tokens.device)
        kept = torch.gather(grid, 1, index[..., None].expand(-1, -1, grid.shape[-1]))
        tokens = torch.cat((tokens[:, :p], kept), dim=1)
        sin, cos = kwargs["rope"]
        # Per-image RoPE rows: B x 1 x K x D broadcasts over the heads in apply_rope.
        kwargs = {"rope": (sin[index][:, None], cos[index][:, None])}
    for blk in backbone._block_list():
        tokens = blk(tokens, **kwargs)
    if backbone.ln1 is not None:
        tokens = backbone.ln1(tokens)
    return tokens, hw


def target_patch_size(backbone: nn.Module) -> int:
    """Pixel side of the area one block token covers (patch size x tokenizer window)."""
    return int(backbone.patch_size) * int(backbone.window_size)
