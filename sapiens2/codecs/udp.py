"""UDP heatmap codec (Unbiased Data Processing, Huang et al. 2020) for top-down pose.

Conventions (those of the official Sapiens2 pose models):

* Sizes are given as ``(width, height)``.
* Keypoints live in input-image pixels. The encoder maps input pixel ``x`` to heatmap pixel
  ``x * (heatmap_size - 1) / (input_size - 1)`` (UDP's corner-aligned scale), but the decoder,
  like the official one (mmpose ``UDPHeatmap``), maps back with ``input_size / (heatmap_size - 1)``:
  an encode-decode round trip scales coordinates by ``input_size / (input_size - 1)``.
* Encoding: a Gaussian of ``sigma`` heatmap pixels centred on the exact (sub-pixel) keypoint,
  truncated to the ``(6 sigma + 1)`` square around the rounded keypoint. Keypoints with
  visibility < 0.5 or whose square lies outside the heatmap get weight 0.
* Decoding: argmax (first maximum); the heatmap is blurred with a Gaussian of
  ``blur_kernel_size`` (zero padding, OpenCV's default sigma for that size), rescaled to keep its
  peak, clipped to [1e-3, 50] and log-transformed; one Newton step on the log-heatmap with
  central differences (the DARK/Taylor refinement) moves the argmax to sub-pixel precision.
  The score is the raw heatmap maximum. Keypoints whose maximum is <= 0 are left unrefined at
  heatmap position (-1, -1).
* Refinement rule (``udp_decode(refine=...)``): ``"official"`` (the default, bit for bit the
  official decoder) always takes the Newton step ``-H^-1 g``; where the log-map's Hessian at the
  argmax is (nearly) singular or not negative definite (a flat or clamped log-map, a saddle: common
  on predicted, non-Gaussian heatmaps) that step is unbounded and can throw a keypoint thousands of
  pixels away. ``"bounded"`` keeps the step only where it is the step to a maximum within the
  pixels the step was read from, and otherwise returns the argmax (see :func:`udp_decode`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

REFINE_RULES = ("official", "bounded")

# OpenCV's fixed kernels for small sizes when sigma <= 0 (cv::getGaussianKernel).
_SMALL_KERNELS = {
    1: [1.0],
    3: [0.25, 0.5, 0.25],
    5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
    7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125],
}


def _size_pair(size: Sequence[int], name: str) -> tuple[int, int]:
    if len(size) != 2 or min(int(s) for s in size) < 2:
        raise ValueError(f"{name} must be (width, height) with both >= 2, got {tuple(size)}")
    return int(size[0]), int(size[1])


def gaussian_kernel1d(kernel_size: int, dtype=torch.float64) -> torch.Tensor:
    """The 1-D Gaussian kernel OpenCV uses for ``GaussianBlur(ksize, sigma=0)``.

    Args:
        kernel_size: odd kernel size.
        dtype: dtype of the returned kernel.

    Returns:
        Normalised kernel of length ``kernel_size``.
    """
    if kernel_size % 2 != 1 or kernel_size < 1:
        raise ValueError(f"blur_kernel_size must be odd and positive, got {kernel_size}")
    if kernel_size in _SMALL_KERNELS:
        return torch.tensor(_SMALL_KERNELS[kernel_size], dtype=dtype)
    sigma = 0.3 * ((kernel_size - 1) * 0.5 - 1) + 0.8
    x = torch.arange(kernel_size, dtype=torch.float64) - (kernel_size - 1) / 2
    k = torch.exp(-(x**2) / (2 * sigma**2))
    return (k / k.sum()).to(dtype)


def udp_encode(
    keypoints: np.ndarray,
    visibility: np.ndarray | None,
    input_size: Sequence[int],
    heatmap_size: Sequence[int],
    sigma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Encode one instance's keypoints as UDP Gaussian heatmaps.

    Args:
        keypoints: K x 2 keypoints in input-image pixels (a leading instance axis of 1 is accepted).
        visibility: K visibilities/weights (None: all 1); < 0.5 means unlabelled.
        input_size: model input size (width, height).
        heatmap_size: heatmap size (width, height).
        sigma: Gaussian sigma in heatmap pixels.

    Returns:
        ``(heatmaps, weights)``: float32 K x H x W heatmaps and float32 K weights.
    """
    kpts = np.asarray(keypoints, dtype=np.float32)
    if kpts.ndim == 3 and kpts.shape[0] == 1:
        kpts = kpts[0]
    if kpts.ndim != 2 or kpts.shape[1] != 2:
        raise ValueError(f"keypoints must be K x 2, got shape {tuple(np.shape(keypoints))}")
    num_kpts = kpts.shape[0]
    vis = np.ones(num_kpts, np.float32) if visibility is None else np.asarray(visibility, np.float32)
    vis = vis.reshape(-1)
    if vis.shape[0] != num_kpts:
        raise ValueError(f"visibility has {vis.shape[0]} entries, expected {num_kpts} (one per keypoint)")
    if not np.isfinite(kpts).all():
        raise ValueError("keypoints contain NaN or Inf")
    in_w, in_h = _size_pair(input_size, "input_size")
    hm_w, hm_h = _size_pair(heatmap_size, "heatmap_size")
    scale = ((np.array([in_w, in_h]) - 1) / (np.array([hm_w, hm_h]) - 1)).astype(np.float32)
    centre = (kpts / scale).astype(np.float64)  # K x 2, heatmap pixels
    radius = int(sigma * 3)
    mu = (centre + 0.5).astype(np.int64)  # truncation, as the reference codec does
    weights = vis.copy()
    labelled = vis >= 0.5
    outside = (mu[:, 0] - radius >= hm_w) | (mu[:, 1] - radius >= hm_h)
    outside |= (mu[:, 0] + radius + 1 < 0) | (mu[:, 1] + radius + 1 < 0)
    weights[labelled & outside] = 0.0
    active = labelled & ~outside

    xs = np.arange(hm_w, dtype=np.float64)
    ys = np.arange(hm_h, dtype=np.float64)
    gx = np.exp(-((xs[None] - centre[:, :1]) ** 2) / (2 * sigma**2))  # K x W
    gy = np.exp(-((ys[None] - centre[:, 1:]) ** 2) / (2 * sigma**2))  # K x H
    gx *= np.abs(xs[None] - mu[:, :1]) <= radius
    gy *= np.abs(ys[None] - mu[:, 1:]) <= radius
    heatmaps = gy.astype(np.float32)[:, :, None] * gx.astype(np.float32)[:, None, :]
    heatmaps[~active] = 0.0
    return heatmaps, weights.astype(np.float32)


def _band(kernel: torch.Tensor, n: int) -> torch.Tensor:
    """``n x n`` matrix of the zero-padded 1D correlation with ``kernel``: ``M[i, j] = k[j - i + p]``."""
    size = kernel.numel()
    idx = torch.arange(n, device=kernel.device)
    offset = idx[None] - idx[:, None] + size // 2
    inside = (offset >= 0) & (offset < size)
    return torch.where(inside, kernel[offset.clamp(0, size - 1)], torch.zeros((), dtype=kernel.dtype))


def _blur_keep_peak(heatmaps: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Zero-padded separable Gaussian blur of N x H x W maps, rescaled to the original peak.

    The two 1D passes are products with banded matrices (the same sums as a zero-padded conv2d;
    on a CPU several times faster in float64, where conv2d has no fast kernel).
    """
    n, h, w = heatmaps.shape
    kernel = gaussian_kernel1d(kernel_size, heatmaps.dtype).to(heatmaps.device)
    x = _band(kernel, h) @ (heatmaps @ _band(kernel, w).T)
    peak_before = heatmaps.reshape(n, -1).amax(1)
    peak_after = x.reshape(n, -1).amax(1)
    return x * (peak_before / peak_after).view(n, 1, 1)


def udp_decode(
    heatmaps: torch.Tensor | np.ndarray,
    input_size: Sequence[int],
    heatmap_size: Sequence[int] | None = None,
    blur_kernel_size: int = 11,
    refine: str = "official",
) -> tuple[torch.Tensor | np.ndarray, torch.Tensor | np.ndarray]:
    """Decode UDP heatmaps to keypoints and scores, batched and vectorised.

    The sub-pixel refinement is one Newton step ``shift = H^-1 g`` on the blurred log-heatmap at the
    argmax (``H``: the central-difference Hessian with ``float32`` eps added to its diagonal, as the
    official decoder; ``g``: the central-difference gradient); the keypoint is ``argmax - shift``.

    ``refine="bounded"`` keeps that step where it stays inside the argmax's own pixel cell
    (``|shift| <= 0.5`` on each axis: it moves the keypoint no farther than the argmax's rounding
    does, whatever the curvature; at the heatmap's edge the replicate padding makes the step exactly
    half a pixel outward, toward a peak beyond the edge, and it is kept), and a longer step only where
    both hold:

    * ``H`` is negative definite (``H_xx < 0`` and ``det H > 0``, on the same eps-shifted ``H``
      the step solves with): only then is the step's target a maximum of the local quadratic model;
      at a saddle or minimum it points at no peak, and as ``det H -> 0`` (a flat ridge, or a log-map
      flattened by the 1e-3 clamp) its length grows without bound;
    * ``|shift| <= (blur_kernel_size + 1) / 2`` heatmap pixels on each axis (6 for the kernel of 11):
      the step is read from the blurred map's 3 x 3 values at the argmax, and those depend on the raw
      heatmap within that many pixels (the blur's radius plus the stencil's one pixel); a longer step
      points at nothing the stencil saw. Shorter steps are real: when noise puts the raw argmax on a
      spike beside the peak, the step pulls it back by a pixel or two, so a one-pixel bound would
      lose accuracy on noisy but well-formed peaks.

    Otherwise the keypoint is the argmax itself (heatmap pixel, scaled like every keypoint).
    Where the step is kept the result is the official one bit for bit.

    Args:
        heatmaps: B x K x H x W (or K x H x W) heatmaps, tensor (any device) or ndarray.
        input_size: model input size (width, height); keypoints are returned in these pixels.
        heatmap_size: (width, height); must match the heatmaps' last two dims (None: taken from them).
        blur_kernel_size: odd Gaussian kernel size of the refinement (11 for sigma 2, 17 for sigma 3).
        refine: ``"official"`` (always the Newton step, as the official decoder) or ``"bounded"``
            (the step only where it is bounded, as above).

    Returns:
        ``(keypoints B x K x 2, scores B x K)`` as float32, of the same kind (tensor/ndarray) as the
        input; a K x H x W input gives 1 x K x 2 and 1 x K.
    """
    if refine not in REFINE_RULES:
        raise ValueError(f"udp_decode: refine must be one of {REFINE_RULES}, got {refine!r}")
    is_numpy = isinstance(heatmaps, np.ndarray)
    hm = torch.from_numpy(np.ascontiguousarray(heatmaps)) if is_numpy else heatmaps
    if hm.ndim == 3:
        hm = hm[None]
    if hm.ndim != 4:
        raise ValueError(f"heatmaps must be B x K x H x W, got shape {tuple(hm.shape)}")
    b, k, h, w = hm.shape
    if heatmap_size is not None and (int(heatmap_size[0]), int(heatmap_size[1])) != (w, h):
        raise ValueError(
            f"heatmap_size {tuple(heatmap_size)} (w, h) does not match heatmaps of H x W {h} x {w}"
        )
    in_w, in_h = _size_pair(input_size, "input_size")
    _size_pair((w, h), "heatmap_size")
    hm = hm.detach().to(torch.float64).reshape(b * k, h, w)
    if not torch.isfinite(hm).all():
        raise ValueError("heatmaps contain NaN or Inf")

    scores, flat_idx = hm.reshape(b * k, -1).max(dim=1)
    ys = torch.div(flat_idx, w, rounding_mode="floor")
    xs = flat_idx - ys * w
    valid = scores > 0

    logmap = torch.log(_blur_keep_peak(hm, blur_kernel_size).clamp(1e-3, 50.0))
    padded = F.pad(logmap[:, None], (1, 1, 1, 1), mode="replicate")[:, 0]  # edge padding
    rows = torch.arange(b * k, device=hm.device)
    px = xs.clamp(0, w - 1) + 1
    py = ys.clamp(0, h - 1) + 1

    def at(dx: int, dy: int) -> torch.Tensor:
        return padded[rows, py + dy, px + dx]

    centre = at(0, 0)
    dx = 0.5 * (at(1, 0) - at(-1, 0))
    dy = 0.5 * (at(0, 1) - at(0, -1))
    dxx = at(1, 0) - 2 * centre + at(-1, 0)
    dyy = at(0, 1) - 2 * centre + at(0, -1)
    dxy = 0.5 * (at(1, 1) - at(1, 0) - at(0, 1) + 2 * centre - at(-1, 0) - at(0, -1) + at(-1, -1))
    eps = float(np.finfo(np.float32).eps)
    a, c = dxx + eps, dyy + eps
    det = a * c - dxy * dxy
    shift_x = (c * dx - dxy * dy) / det
    shift_y = (a * dy - dxy * dx) / det
    if refine == "bounded":
        step = torch.maximum(shift_x.abs(), shift_y.abs())  # NaN where det is 0: never kept
        reach = (blur_kernel_size + 1) / 2
        keep = (step <= 0.5) | ((a < 0) & (det > 0) & (step <= reach))
        zero = torch.zeros((), dtype=shift_x.dtype, device=shift_x.device)
        shift_x, shift_y = torch.where(keep, shift_x, zero), torch.where(keep, shift_y, zero)
    kx = torch.where(valid, xs.to(torch.float64) - shift_x, torch.full_like(shift_x, -1.0))
    ky = torch.where(valid, ys.to(torch.float64) - shift_y, torch.full_like(shift_y, -1.0))
    kx = kx * (in_w / (w - 1))
    ky = ky * (in_h / (h - 1))
    keypoints = torch.stack([kx, ky], dim=-1).reshape(b, k, 2).to(torch.float32)
    scores = scores.reshape(b, k).to(torch.float32)
    if is_numpy:
        return keypoints.numpy(), scores.numpy()
    return keypoints, scores


def flip_permutation(flip_pairs: Sequence[Sequence[int]], num_keypoints: int) -> list[int]:
    """Index permutation that swaps left/right keypoints.

    Args:
        flip_pairs: pairs (a, b) of symmetric keypoint ids; listing a pair in both orders is fine.
        num_keypoints: K.

    Returns:
        ``perm`` with ``perm[i]`` the id whose (mirrored) heatmap becomes channel ``i``.
    """
    perm = list(range(num_keypoints))
    for pair in flip_pairs:
        a, b = int(pair[0]), int(pair[1])
        if not (0 <= a < num_keypoints and 0 <= b < num_keypoints):
            raise ValueError(f"flip pair {tuple(pair)} is outside 0..{num_keypoints - 1}")
        perm[a], perm[b] = b, a
    return perm


def flip_heatmaps(
    heatmaps: torch.Tensor | np.ndarray, flip_pairs: Sequence[Sequence[int]] | None
) -> torch.Tensor | np.ndarray:
    """Mirror heatmaps of a horizontally flipped input back and swap symmetric channels.

    For UDP no one-pixel shift is applied (heatmap corners are aligned with image corners).

    Args:
        heatmaps: ... x K x H x W heatmaps predicted on the flipped image.
        flip_pairs: symmetric keypoint id pairs (e.g. ``keypoints308()['flip_pairs']``); None: no swap.

    Returns:
        Heatmaps aligned with the unflipped image, same kind as the input.
    """
    num_kpts = heatmaps.shape[-3]
    perm = flip_permutation(flip_pairs or [], num_kpts)
    if isinstance(heatmaps, np.ndarray):
        return np.ascontiguousarray(heatmaps[..., perm, :, ::-1])
    return heatmaps.flip(-1)[..., perm, :, :]


def fuse_flip(
    heatmaps: torch.Tensor, heatmaps_flipped: torch.Tensor, flip_pairs: Sequence[Sequence[int]]
) -> torch.Tensor:
    """Flip-test fusion: mean of the heatmaps and the un-flipped heatmaps of the mirrored input."""
    return 0.5 * (heatmaps + flip_heatmaps(heatmaps_flipped, flip_pairs))


__all__ = [
    "REFINE_RULES",
    "udp_encode",
    "udp_decode",
    "flip_heatmaps",
    "flip_permutation",
    "fuse_flip",
    "gaussian_kernel1d",
]
