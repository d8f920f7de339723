"""Pointmap geometry: OpenCV-equivalent 5x5 Sobel derivatives, the normals of a pointmap, and the
column-wise 3-vector products and normal angles :class:`evaluators.pointmap.PointmapEvaluator`
computes its normal metrics from (on C x N columns, written for in-place, allocation-light use).
"""

from __future__ import annotations

import math

import torch

from evaluators import filters
from evaluators.dense_common import chan_norm


def sobel5_kernels(dtype=torch.float32, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """OpenCV's 5x5 Sobel kernels (d/dx, d/dy), as cross-correlation weights 5 x 5.

    Example:
        >>> kx, ky = sobel5_kernels()
        >>> kx[2].tolist(), bool((ky == kx.T).all())
        ([-6.0, -12.0, 0.0, 12.0, 6.0], True)
    """
    smooth = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], dtype=dtype, device=device)
    deriv = torch.tensor([-1.0, -2.0, 0.0, 2.0, 1.0], dtype=dtype, device=device)
    kx = smooth[:, None] * deriv[None, :]
    return kx, kx.T.contiguous()


def sobel5(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel 5x5 Sobel derivatives of B x C x H x W ``x`` (reflect-101 border, as OpenCV).

    Returns:
        (d/dx, d/dy), each B x C x H x W (see :func:`evaluators.filters.sobel5`).
    """
    return filters.sobel5(x)


def pointmap_normals(points: torch.Tensor) -> torch.Tensor:
    """Normals of a B x 3 x H x W pointmap: cross(dP/dx, dP/dy) / (|.| + 1e-6).

    Example:
        >>> v, u = torch.meshgrid(torch.arange(6.), torch.arange(6.), indexing="ij")
        >>> plane = torch.stack([u, v, torch.ones_like(u)])[None]
        >>> pointmap_normals(plane)[0, :, 3, 3].round(decimals=4).tolist()
        [0.0, 0.0, 1.0]
    """
    dx, dy = sobel5(points)
    a0, a1, a2 = dx[:, 0], dx[:, 1], dx[:, 2]
    b0, b1, b2 = dy[:, 0], dy[:, 1], dy[:, 2]
    n = torch.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], 1)  # cross product
    return n / (chan_norm(n) + 1e-6)[:, None]


def dot3(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Column-wise dot product of two C x N tensors (plane additions, no strided reduction)."""
    out = torch.mul(a[0], b[0], out=out) if out is not None else a[0] * b[0]
    for c in range(1, a.shape[0]):
        out.addcmul_(a[c], b[c])
    return out


def norm3(a: torch.Tensor) -> torch.Tensor:
    return dot3(a, a).sqrt_()


def cross3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``cross(a, b)`` of 3 x N columns (two fused ops per component, no temporaries)."""
    out = torch.empty_like(a)
    for k, (i, j) in enumerate(((1, 2), (2, 0), (0, 1))):
        torch.mul(a[i], b[j], out=out[k]).addcmul_(a[j], b[i], value=-1.0)
    return out


def normal_angle_deg(n1: torch.Tensor, n2: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Angle (degrees) between the official normals ``n / (|n| + 1e-6)`` of two 3 x N cross products.

    ``dot(n1 / (|n1| + e), n2 / (|n2| + e)) = dot(n1, n2) / ((|n1| + e)(|n2| + e))``: the same value
    without normalising six planes.

    Example:
        >>> n = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 2.0]])
        >>> normal_angle_deg(n, torch.tensor([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])).round().tolist()
        [0.0, 90.0]
    """
    den = norm3(n1).add_(1e-6).mul_(norm3(n2).add_(1e-6))
    cos = dot3(n1, n2, out=out).div_(den).clamp_(-1.0, 1.0)
    return cos.acos_().mul_(180.0 / math.pi)
