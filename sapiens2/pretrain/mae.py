"""Masked-autoencoder part: patchified, per-patch normalised pixel targets, the masked-token MSE and
the light decoder.

Example:
    >>> import torch
    >>> x = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 3, 4, 4)
    >>> patchify(x, 2).shape
    torch.Size([2, 4, 12])
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from sapiens2.models.backbones.common import trunc_normal_init
from sapiens2.models.backbones.sapiens2_layers import RopePositionEmbedding, Sapiens2Block
from sapiens2.pretrain.registry import PRETRAIN_MODELS


def patchify(images: Tensor, patch: int) -> Tensor:
    """B x C x H x W -> B x (H/p * W/p) x (p * p * C), patches in row-major order, each patch
    flattened as (row, column, channel).

    Raises:
        ValueError: a side is not a multiple of ``patch``.
    """
    b, c, h, w = images.shape
    if h % patch or w % patch:
        raise ValueError(f"image {h}x{w} is not divisible into {patch}x{patch} patches")
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(b, (h // patch) * (w // patch), patch * patch * c)


def normalized_targets(patches: Tensor, eps: float = 1e-6) -> Tensor:
    """Normalise each patch by its own mean and (population) variance over all its values."""
    mean = patches.mean(dim=-1, keepdim=True)
    var = patches.var(dim=-1, keepdim=True, unbiased=False)
    return (patches - mean) / torch.sqrt(var + eps)


def mae_loss(pred: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Mean squared error over the masked tokens only.

    Args:
        pred: B x N x D predictions for every grid token.
        target: B x N x D targets.
        mask: B x N bool, True where masked.

    Returns:
        Scalar: the mean over masked tokens of the per-token mean squared error.
    """
    per_token = (pred.float() - target.float()).pow(2).mean(dim=-1)
    m = mask.to(per_token.dtype)
    return (per_token * m).sum() / m.sum().clamp_min(1.0)


@PRETRAIN_MODELS.register_module()
class MAEDecoder(nn.Module):
    """Light transformer decoder: visible tokens + mask tokens -> pixels of every grid token.

    Blocks are Sapiens2 blocks (RMSNorm, QK-Norm, SwiGLU) with fp32 2-D RoPE on the full grid,
    so no position table ties the decoder to one input size.

    Args:
        in_dims: encoder width (filled in by the pretrainer).
        out_dims: pixels per token, ``patch * patch * 3`` (filled in by the pretrainer).
        embed_dims: decoder width (512 in the paper).
        num_layers: decoder blocks (8 in the paper).
        num_heads: attention heads (``embed_dims / num_heads`` a multiple of 4).
        ffn_ratio: SwiGLU hidden width over ``embed_dims``.
    """

    def __init__(self, in_dims: int, out_dims: int, embed_dims: int = 512, num_layers: int = 8,
                 num_heads: int = 16, ffn_ratio: float = 4.0):
        super().__init__()
        if embed_dims % num_heads or (embed_dims // num_heads) % 4:
            raise ValueError(f"MAEDecoder: embed_dims {embed_dims} / num_heads {num_heads} must be an "
                             f"integer multiple of 4 (2-D RoPE)")
        self.embed = nn.Linear(in_dims, embed_dims)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.rope = RopePositionEmbedding(embed_dims // num_heads, base=100.0, dtype="fp32")
        self.blocks = nn.ModuleList(
            Sapiens2Block(embed_dims, num_heads, int(embed_dims * ffn_ratio)) for _ in range(num_layers)
        )
        self.norm = nn.RMSNorm(embed_dims, eps=1e-6)
        self.pred = nn.Linear(embed_dims, out_dims)
        self.apply(trunc_normal_init)
        nn.init.normal_(self.mask_token, std=0.02)

    def forward(self, tokens: Tensor, ids_keep: Tensor, grid: tuple[int, int], num_prefix: int) -> Tensor:
        """Predict every grid token's pixels.

        Args:
            tokens: B x (prefix + K) x in_dims encoder output of the visible tokens.
            ids_keep: B x K grid indices of the visible tokens.
            grid: (h, w) full token grid.
            num_prefix: CLS + storage tokens at the front of ``tokens``.

        Returns:
            B x (h * w) x out_dims.
        """
        x = self.embed(tokens)
        b, _, d = x.shape
        n = grid[0] * grid[1]
        full = self.mask_token.to(x.dtype).expand(b, n, d)
        index = ids_keep.to(x.device)[..., None].expand(-1, -1, d)
        full = full.scatter(1, index, x[:, num_prefix:])
        x = torch.cat((x[:, :num_prefix], full), dim=1)
        rope = self.rope(*grid)
        for blk in self.blocks:
            x = blk(x, rope=rope)
        return self.pred(self.norm(x[:, num_prefix:]))


def mae_targets(images: Tensor, patch: int, eps: float = 1e-6) -> Tensor:
    """Per-patch normalised pixel targets of a batch (no gradient)."""
    with torch.no_grad():
        return normalized_targets(patchify(images.float(), patch), eps)

