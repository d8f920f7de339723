"""The read-out's per-batch float64 sums of products, ``x^T x`` and ``x^T y``, added in place.

:func:`add_gram` (BLAS syrk: one triangle) and :func:`add_cross` (block-sparse ``x^T y``) are the
fast paths a wide feature stream takes (``stream.FAST_PRODUCTS_MIN_CHANNELS``); with ``exact`` both
keep the plain arithmetic (the full product, then the addition), so records made with it stay
bit for bit. Measured side by side in
``benchmarks/speed/cross_products.py``.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.linalg import blas

# rough costs read off benchmarks/speed/cross_products.py runs on the 2-core VM: a float64 multiply-add
# of the dense product, one of a block's (gathered rows, narrow output) and the fixed cost of one block
_DENSE_MAC_S, _BLOCK_MAC_S, _BLOCK_S = 2.0e-11, 4.0e-11, 2.0e-4


def _nonzero_rows(y: torch.Tensor, block: int, channels: int) -> list | None:
    """``[(j, rows)]``: per block ``j`` of ``block`` columns of ``y`` the rows where it is not all zero;
    None when the dense product is expected to be as fast (blocks that do not divide the columns,
    or too few channels for the saved multiplications to pay for the per-block products)."""
    r, o = y.shape
    dense = r * channels * o * _DENSE_MAC_S
    if block <= 0 or o % block or r == 0 or dense < 2 * (o // block) * _BLOCK_S:
        return None
    nz = y.reshape(r, o // block, block).ne(0).any(-1)  # R x blocks
    pairs = nz.T.nonzero()  # (block, row), sorted by block
    if dense < 2 * (len(pairs) * channels * block * _BLOCK_MAC_S + int(nz.any(0).sum()) * _BLOCK_S):
        return None
    counts = torch.bincount(pairs[:, 0], minlength=o // block).tolist()
    return [(j, rows) for j, rows in enumerate(pairs[:, 1].split(counts)) if len(rows)]


def add_cross(acc: torch.Tensor, x: torch.Tensor, y: torch.Tensor, block: int = 0,
              exact: bool = False) -> None:
    """``acc += x^T y`` in place (``acc``: float64 on the host; ``x``, ``y``: rows in the product dtype,
    wherever they are).

    With ``block``, the rows on which a block of ``block`` output columns is all zero are left out of
    that block's product: they add exactly zero, so the sum is the same up to the order of its
    float64 additions. A 29-class one-hot at stride 1 has one non-zero block in 29 per row, a
    308-keypoint heatmap a few rows per keypoint (``benchmarks/speed/cross_products.py``: 5-6x at
    ``sapiens2_1b``'s width). ``exact``: the product, then the addition, in that order (the plain
    arithmetic, bit for bit; the reference rows keep it, see ``stream._FeatureSums``).
    """
    parts = None if exact else _nonzero_rows(y, block, x.shape[1])
    if parts is None:
        if x.device == acc.device and x.dtype == acc.dtype and not exact:
            acc.addmm_(x.T, y)  # no C x O temporary
        else:
            acc += (x.T @ y).double().cpu()
        return
    for j, rows in parts:
        cols = slice(j * block, (j + 1) * block)
        acc[:, cols] += (x[rows].T @ y[rows, cols]).double().cpu()


def add_gram(acc: torch.Tensor, x: torch.Tensor, exact: bool = False) -> None:
    """``acc += x^T x`` on the lower triangle of ``acc`` (C x C float64 on the host; ``x``: R x C rows);
    its upper triangle is left unspecified until :func:`symmetrize_` mirrors the lower one (once, after
    the last batch).

    Host rows go through BLAS syrk (SciPy's), which computes one triangle: half the multiplications of
    ``x.T @ x`` (``benchmarks/speed/cross_products.py``); float64 rows (``dsyrk``) straight into
    ``acc``, float32 ones (``ssyrk``: the ``ridge_product_dtype: "float32"`` products) into a float32
    triangle that is then added to ``acc``. Rows on a device and ``exact`` (as :func:`add_cross`) add
    the full product.
    """
    if not exact and x.device.type == "cpu" and acc.is_contiguous() and len(x):
        if x.dtype == torch.float64:
            c = acc.numpy().T  # Fortran order: BLAS sees acc^T, whose upper triangle is acc's lower one
            out = blas.dsyrk(1.0, x.contiguous().numpy().T, beta=1.0, c=c, trans=0, lower=0, overwrite_c=1)
            if not np.shares_memory(out, c):  # a copy would leave acc unchanged
                raise RuntimeError("add_gram: BLAS syrk did not update the Gram in place")
            return
        if x.dtype == torch.float32:
            # the upper triangle of x^T x, the rest zero: transposed, it adds to acc's lower triangle
            part = blas.ssyrk(1.0, x.contiguous().numpy().T, trans=0, lower=0)
            acc += torch.from_numpy(part).T
            return
    add_cross(acc, x, x, exact=exact)


def symmetrize_(acc: torch.Tensor) -> torch.Tensor:
    """Mirror the lower triangle of the square ``acc`` onto its upper one, in place."""
    return acc.copy_(acc.tril() + acc.tril(-1).T)
