"""Mixed blockwise / patchwise masking of the token grid (Sapiens2 pretraining).

Each image is masked blockwise with probability ``block_prob`` (random rectangles, as in BEiT,
until the budget is reached) and patchwise otherwise (a uniformly random subset). Either way
exactly ``mask_count(h * w, ratio)`` tokens are masked, so every image of a batch keeps the same
number of visible tokens and the encoder can drop the masked ones.

Example:
    >>> import torch
    >>> m = MixedBlockMasking(ratio=0.75, block_prob=0.4)
    >>> out = m(4, (8, 6), torch.Generator().manual_seed(0))
    >>> out.mask.shape, out.mask.sum(1).tolist()
    (torch.Size([4, 48]), [36, 36, 36, 36])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from sapiens2.pretrain.registry import PRETRAIN_MODELS


def mask_count(num_tokens: int, ratio: float) -> int:
    """Number of masked tokens: ``ratio * num_tokens`` rounded half up, at most ``num_tokens - 1``.

    Args:
        num_tokens: tokens in the grid.
        ratio: mask ratio in [0, 1).

    Returns:
        The count (at least one token always stays visible).

    Example:
        >>> mask_count(3072, 0.75), mask_count(12, 0.75), mask_count(30, 0.75)
        (2304, 9, 23)
    """
    return min(int(math.floor(num_tokens * ratio + 0.5)), num_tokens - 1)


@dataclass
class MaskDraw:
    """Masks of one batch.

    Attributes:
        mask: B x N bool, True = masked (grid in row-major order, as the patch embedding flattens).
        ids_keep: B x K indices of the visible tokens, ascending.
        blockwise: B bool, which images were masked blockwise.
    """

    mask: Tensor
    ids_keep: Tensor
    blockwise: Tensor


def _uniform(gen: torch.Generator, lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=gen))


def _randint(gen: torch.Generator, lo: int, hi: int) -> int:
    """Uniform integer in [lo, hi]."""
    return int(torch.randint(lo, hi + 1, (), generator=gen))


def block_mask(h: int, w: int, count: int, gen: torch.Generator, min_block: int = 4,
               aspect: tuple[float, float] = (0.3, 1 / 0.3), max_tries: int = 200) -> Tensor:
    """A blockwise mask with exactly ``count`` of ``h * w`` tokens masked.

    Rectangles of random area (``min_block`` up to the remaining budget) and log-uniform aspect
    ratio are added until the budget is reached; rounding overshoot is removed and any shortfall
    (after ``max_tries``) is filled with random tokens.

    Returns:
        h*w bool tensor.
    """
    mask = torch.zeros(h, w, dtype=torch.bool)
    lo_a, hi_a = math.log(aspect[0]), math.log(aspect[1])
    for _ in range(max_tries):
        remaining = count - int(mask.sum())
        if remaining <= 0:
            break
        area = _uniform(gen, min(min_block, remaining), remaining)
        ar = math.exp(_uniform(gen, lo_a, hi_a))
        bh = max(1, min(h, int(round(math.sqrt(area * ar)))))
        bw = max(1, min(w, int(round(math.sqrt(area / ar)))))
        top, left = _randint(gen, 0, h - bh), _randint(gen, 0, w - bw)
        mask[top : top + bh, left : left + bw] = True
    flat = mask.flatten()
    n = int(flat.sum())
    if n > count:  # drop random masked tokens
        on = flat.nonzero().squeeze(1)
        flat[on[torch.randperm(on.numel(), generator=gen)[: n - count]]] = False
    elif n < count:  # fill with random unmasked tokens
        off = (~flat).nonzero().squeeze(1)
        flat[off[torch.randperm(off.numel(), generator=gen)[: count - n]]] = True
    return flat


def patch_mask(n: int, count: int, gen: torch.Generator) -> Tensor:
    """A uniformly random mask with exactly ``count`` of ``n`` tokens masked."""
    flat = torch.zeros(n, dtype=torch.bool)
    flat[torch.randperm(n, generator=gen)[:count]] = True
    return flat


@PRETRAIN_MODELS.register_module()
class MixedBlockMasking:
    """Mixed blockwise / patchwise mask generator.

    Args:
        ratio: fraction of tokens masked (0.75 in Sapiens2).
        block_prob: probability that an image is masked blockwise (0.4 in Sapiens2).
        min_block: smallest rectangle area in tokens.
        aspect: range of the rectangles' aspect ratio (log-uniform).
    """

    def __init__(self, ratio: float = 0.75, block_prob: float = 0.4, min_block: int = 4,
                 aspect: tuple[float, float] = (0.3, 1 / 0.3)):
        if not 0.0 <= ratio < 1.0:
            raise ValueError(f"mask ratio must be in [0, 1), got {ratio}")
        if not 0.0 <= block_prob <= 1.0:
            raise ValueError(f"block_prob must be in [0, 1], got {block_prob}")
        if min_block < 1 or not 0 < aspect[0] <= aspect[1]:
            raise ValueError(f"bad block shape settings: min_block={min_block}, aspect={aspect}")
        self.ratio, self.block_prob = float(ratio), float(block_prob)
        self.min_block, self.aspect = int(min_block), (float(aspect[0]), float(aspect[1]))

    def __call__(self, batch: int, grid: tuple[int, int], gen: torch.Generator) -> MaskDraw:
        """Draw masks for ``batch`` images on an ``h x w`` token grid.

        Args:
            batch: number of images.
            grid: (h, w) token grid.
            gen: the random generator (all draws come from it).

        Returns:
            A :class:`MaskDraw`.
        """
        h, w = grid
        n = h * w
        count = mask_count(n, self.ratio)
        masks, blockwise = [], []
        for _ in range(batch):
            is_block = float(torch.rand((), generator=gen)) < self.block_prob
            blockwise.append(is_block)
            if is_block:
                masks.append(block_mask(h, w, count, gen, self.min_block, self.aspect))
            else:
                masks.append(patch_mask(n, count, gen))
        mask = torch.stack(masks)
        # A stable sort puts the visible (False) tokens first, in ascending order.
        ids_keep = torch.argsort(mask.to(torch.int8), dim=1, stable=True)[:, : n - count]
        return MaskDraw(mask=mask, ids_keep=ids_keep, blockwise=torch.tensor(blockwise))
