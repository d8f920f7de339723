"""Fast separable image filters for the dense evaluators (Gaussian blur, 5x5 Sobel).

On CPU tensors the filters run plane by plane in OpenCV (``cv2.sepFilter2D`` / ``cv2.Sobel``,
SIMD, float32 or float64) when it is installed, else in SciPy (``scipy.ndimage.correlate1d``).
Both are many times faster than PyTorch's CPU ``conv2d`` for one-channel kernels, and float64
costs them little, so SSIM moments keep float64. On other devices the filters use ``conv2d``.

Example:
    >>> import torch
    >>> x = torch.zeros(1, 1, 9, 9, dtype=torch.float64); x[0, 0, 4, 4] = 1
    >>> g = gaussian_window(5, 1.0)
    >>> y = gaussian_blur(x, g)
    >>> round(float(y.sum()), 6), tuple(y.shape)
    (1.0, (1, 1, 9, 9))
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

try:  # optional: the fastest CPU path
    import cv2
except ImportError:  # pragma: no cover - depends on the environment
    cv2 = None

_SMOOTH5 = (1.0, 4.0, 6.0, 4.0, 1.0)
_DERIV5 = (-1.0, -2.0, 0.0, 2.0, 1.0)


def gaussian_window(size: int = 11, sigma: float = 1.5, dtype=torch.float64, device=None) -> torch.Tensor:
    """Normalised 1-D Gaussian of ``size`` taps.

    Example:
        >>> round(float(gaussian_window().sum()), 6)
        1.0
    """
    x = torch.arange(size, dtype=dtype, device=device) - (size - 1) / 2.0
    g = torch.exp(-(x * x) / (2 * sigma * sigma))
    return g / g.sum()


def _native_ok(x: torch.Tensor) -> bool:
    """True when ``x`` can go through OpenCV/SciPy (a float CPU tensor)."""
    return x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)


def _planes(x: torch.Tensor) -> np.ndarray:
    return x.detach().reshape(-1, *x.shape[-2:]).contiguous().numpy()


def _conv_sep(x: torch.Tensor, kx: torch.Tensor, ky: torch.Tensor, pad_mode: str) -> torch.Tensor:
    """Separable cross-correlation of N x 1 x H x W with ``kx`` (along W) then ``ky`` (along H)."""
    k = kx.numel() // 2
    if pad_mode == "zeros":
        y = F.conv2d(x, kx.view(1, 1, 1, -1), padding=(0, k))
        return F.conv2d(y, ky.view(1, 1, -1, 1), padding=(k, 0))
    y = F.conv2d(F.pad(x, (k, k, 0, 0), mode=pad_mode), kx.view(1, 1, 1, -1))
    return F.conv2d(F.pad(y, (0, 0, k, k), mode=pad_mode), ky.view(1, 1, -1, 1))


def gaussian_blur(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Separable filter of ... x H x W with the 1-D kernel ``g``, zero padding, same size and dtype."""
    shape = x.shape
    if _native_ok(x):
        a = _planes(x)
        k = g.to(x.dtype).numpy()
        if cv2 is not None:
            out = np.stack([cv2.sepFilter2D(p, -1, k, k, borderType=cv2.BORDER_CONSTANT) for p in a])
        else:
            from scipy import ndimage

            out = ndimage.correlate1d(
                ndimage.correlate1d(a, k, axis=2, mode="constant"), k, axis=1, mode="constant"
            )
        return torch.from_numpy(out).view(shape)
    y = x.reshape(-1, 1, *shape[-2:])
    gk = g.to(x.dtype).to(x.device)
    return _conv_sep(y, gk, gk, "zeros").view(shape)


def sobel5(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-plane 5x5 Sobel derivatives (d/dx, d/dy) of ... x H x W, reflect-101 border (OpenCV's).

    Raises:
        ValueError: H or W below 3 (reflect-101 padding of 2 needs 3 pixels).
    """
    shape = x.shape
    h, w = shape[-2:]
    if h < 3 or w < 3:
        raise ValueError(f"pointmap: 5x5 Sobel needs H, W >= 3, got {h} x {w}")
    if _native_ok(x):
        a = _planes(x)
        if cv2 is not None:  # written in place: no per-plane arrays to stack (a copy of every plane)
            dx, dy = np.empty_like(a), np.empty_like(a)
            for p, ox, oy in zip(a, dx, dy):
                cv2.Sobel(p, -1, 1, 0, dst=ox, ksize=5)
                cv2.Sobel(p, -1, 0, 1, dst=oy, ksize=5)
        else:
            from scipy import ndimage

            s, d = np.asarray(_SMOOTH5, a.dtype), np.asarray(_DERIV5, a.dtype)
            dx = ndimage.correlate1d(
                ndimage.correlate1d(a, d, axis=2, mode="mirror"), s, axis=1, mode="mirror"
            )
            dy = ndimage.correlate1d(
                ndimage.correlate1d(a, s, axis=2, mode="mirror"), d, axis=1, mode="mirror"
            )
        return torch.from_numpy(dx).view(shape), torch.from_numpy(dy).view(shape)
    y = x.reshape(-1, 1, h, w)
    s = torch.tensor(_SMOOTH5, dtype=x.dtype, device=x.device)
    d = torch.tensor(_DERIV5, dtype=x.dtype, device=x.device)
    return _conv_sep(y, d, s, "reflect").view(shape), _conv_sep(y, s, d, "reflect").view(shape)
