"""Post-processing of the raw Sapiens2 head outputs into what a user or an evaluator needs.

Stateless functions on batched tensors:

- pose: flip-test fusion of heatmaps, UDP decoding to keypoints and scores
  (``sapiens2.codecs.udp``), mapping from crop pixels back to image pixels;
- seg: logits resized bilinearly to a target size, then argmax to labels;
- normal: bilinear resize, then unit length;
- pointmap: canonical pointmap times the predicted scale, optionally converted from the canonical
  focal length (768) to the real camera given its intrinsics;
- albedo: bilinear resize, then clamp to [0, 1].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sapiens2.codecs.udp import fuse_flip, udp_decode

CANONICAL_FOCAL_LENGTH = 768.0


def _check_4d(name: str, x: torch.Tensor, channels: int | None = None) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or (channels is not None and x.shape[1] != channels):
        want = f"B x {channels} x H x W" if channels else "B x C x H x W"
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected a {want} tensor, got {got}")


def resize_bilinear(x: torch.Tensor, size: Sequence[int] | None) -> torch.Tensor:
    """Bilinear resize (align_corners=False) of a B x C x H x W map to ``size`` = (H, W); None keeps it."""
    if size is None or tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=tuple(int(s) for s in size), mode="bilinear", align_corners=False)


def seg_logits_to_labels(logits: torch.Tensor, size: Sequence[int] | None = None) -> torch.Tensor:
    """Per-pixel labels from seg logits, resized bilinearly to ``size`` before the argmax.

    Args:
        logits: B x num_classes x H x W.
        size: (H, W) of the labels (e.g. the GT size); None keeps the logits' size.

    Returns:
        B x H x W int64 labels.
    """
    _check_4d("seg logits", logits)
    return resize_bilinear(logits.float(), size).argmax(dim=1)


def unit_normals(normals: torch.Tensor, size: Sequence[int] | None = None,
                 eps: float = 1e-12) -> torch.Tensor:
    """Unit-length normals: resized bilinearly to ``size``, then divided by their L2 norm.

    Args:
        normals: B x 3 x H x W unnormalised normals.
        size: (H, W) of the output; None keeps the input size.
        eps: lower bound of the norm (a zero vector stays zero).

    Returns:
        B x 3 x H x W unit normals.
    """
    _check_4d("normals", normals, 3)
    return F.normalize(resize_bilinear(normals.float(), size), dim=1, eps=eps)


def clamp_albedo(albedo: torch.Tensor, size: Sequence[int] | None = None) -> torch.Tensor:
    """Albedo resized bilinearly to ``size`` and clamped to [0, 1] (B x 3 x H x W)."""
    _check_4d("albedo", albedo, 3)
    return resize_bilinear(albedo.float(), size).clamp(0.0, 1.0)


def _as_intrinsics(K, batch: int, device, dtype) -> torch.Tensor:
    K = torch.as_tensor(np.asarray(K) if not isinstance(K, torch.Tensor) else K, device=device, dtype=dtype)
    if K.shape == (3, 3):
        K = K.expand(batch, 3, 3)
    if K.shape != (batch, 3, 3):
        raise ValueError(f"intrinsics K: expected 3 x 3 or {batch} x 3 x 3, got {tuple(K.shape)}")
    return K


def pointmap_to_metric(pointmap: torch.Tensor, scale: torch.Tensor, K=None,
                       canonical_focal_length: float = CANONICAL_FOCAL_LENGTH,
                       size: Sequence[int] | None = None) -> torch.Tensor:
    """Metric 3-D points from the pointmap head's outputs.

    The head predicts a normalised pointmap P~ and a scale s; ``s * P~`` is the pointmap in the
    canonical camera (focal length ``canonical_focal_length``), which the official training data
    build as the real camera-frame points times ``canonical_focal_length / fx``. Given the
    intrinsics ``K`` of the image the network saw, the points in the real camera are therefore
    ``s * P~ * fx / canonical_focal_length``; without ``K`` the canonical points are returned.

    Args:
        pointmap: B x 3 x H x W output of the pointmap head.
        scale: B x 1 (or B) predicted scale.
        K: optional 3 x 3 or B x 3 x 3 intrinsics of the network input image.
        canonical_focal_length: focal length of the canonical camera (768 in the official models).
        size: optional (H, W) to resize the pointmap to (bilinear) before scaling.

    Returns:
        B x 3 x H x W points (canonical, or metres in the real camera when ``K`` is given).
    """
    _check_4d("pointmap", pointmap, 3)
    b = pointmap.shape[0]
    scale = torch.as_tensor(scale, device=pointmap.device, dtype=torch.float32).reshape(-1)
    if scale.numel() != b:
        raise ValueError(f"pointmap scale: expected {b} values (B x 1), got shape {tuple(scale.shape)}")
    points = resize_bilinear(pointmap.float(), size) * scale.view(b, 1, 1, 1)
    if K is not None:
        fx = _as_intrinsics(K, b, points.device, points.dtype)[:, 0, 0]
        if not torch.all(fx > 0):
            raise ValueError(f"intrinsics K: fx must be positive, got {fx.tolist()}")
        points = points * (fx / canonical_focal_length).view(b, 1, 1, 1)
    return points


def fuse_flip_heatmaps(heatmaps: torch.Tensor, flipped_heatmaps: torch.Tensor,
                       flip_pairs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Average the heatmaps with those of the mirrored input, flipped back (UDP: no pixel shift).

    Args:
        heatmaps: B x K x H x W heatmaps of the input.
        flipped_heatmaps: B x K x H x W heatmaps of the horizontally mirrored input.
        flip_pairs: (left, right) keypoint index pairs swapped by the mirror.

    Returns:
        B x K x H x W fused heatmaps.
    """
    if heatmaps.shape != flipped_heatmaps.shape:
        raise ValueError(f"flip test: heatmaps {tuple(heatmaps.shape)} and flipped heatmaps "
                         f"{tuple(flipped_heatmaps.shape)} differ in shape")
    return fuse_flip(heatmaps, flipped_heatmaps, flip_pairs)


def crop_to_image(keypoints: torch.Tensor, crop) -> torch.Tensor:
    """Map keypoints from crop (network input) pixels to original-image pixels.

    Args:
        keypoints: B x K x 2 in crop pixels.
        crop: either the 2 x 3 or B x 2 x 3 affine matrix that warped the image into the crop
            (image -> crop; it is inverted here), a mapping holding it under ``affine``, or a mapping
            with ``center`` and ``scale`` (B x 2, the box the crop covers, in image pixels) and
            ``input_size`` (w, h), which uses the mmpose convention
            ``kpt / input_size * scale + center - scale / 2``.

    Returns:
        B x K x 2 keypoints in image pixels.
    """
    kpts = torch.as_tensor(keypoints, dtype=torch.float64)
    if kpts.ndim != 3 or kpts.shape[-1] != 2:
        raise ValueError(f"keypoints: expected B x K x 2, got {tuple(kpts.shape)}")
    b = kpts.shape[0]
    if isinstance(crop, Mapping) and "affine" in crop:
        crop = crop["affine"]
    if isinstance(crop, Mapping):
        missing = [k for k in ("center", "scale", "input_size") if k not in crop]
        if missing:
            raise KeyError(f"crop meta lacks {missing}; expected center, scale and input_size")
        center = torch.as_tensor(np.asarray(crop["center"], dtype=np.float64)).reshape(-1, 1, 2)
        scale = torch.as_tensor(np.asarray(crop["scale"], dtype=np.float64)).reshape(-1, 1, 2)
        size = torch.as_tensor(np.asarray(crop["input_size"], dtype=np.float64)).reshape(-1, 1, 2)
        return kpts / size * scale + center - 0.5 * scale
    mat = torch.as_tensor(np.asarray(crop, dtype=np.float64))
    if mat.shape == (2, 3):
        mat = mat.expand(b, 2, 3)
    if mat.shape != (b, 2, 3):
        raise ValueError(f"crop affine: expected 2 x 3 or {b} x 2 x 3, got {tuple(mat.shape)}")
    full = torch.zeros(b, 3, 3, dtype=torch.float64)
    full[:, :2] = mat
    full[:, 2, 2] = 1.0
    inv = torch.linalg.inv(full)[:, :2]
    return kpts @ inv[:, :, :2].transpose(1, 2) + inv[:, :, 2].unsqueeze(1)


def decode_pose_heatmaps(heatmaps: torch.Tensor, input_size: Sequence[int], crop=None,
                         blur_kernel_size: int = 11) -> tuple[torch.Tensor, torch.Tensor]:
    """Keypoints and scores from (already flip-fused) heatmaps by UDP decoding.

    Args:
        heatmaps: B x K x H x W heatmaps.
        input_size: (w, h) of the network input (the crop).
        crop: optional crop meta (see :func:`crop_to_image`) to map back to image pixels.
        blur_kernel_size: Gaussian blur kernel of the UDP refinement.

    Returns:
        (keypoints B x K x 2 float32, scores B x K float32), in crop pixels unless ``crop`` is given.
    """
    _check_4d("pose heatmaps", heatmaps)
    hm_size = (int(heatmaps.shape[-1]), int(heatmaps.shape[-2]))
    kpts, scores = udp_decode(heatmaps.detach().float().cpu(), input_size=tuple(input_size),
                              heatmap_size=hm_size, blur_kernel_size=blur_kernel_size)
    kpts = torch.as_tensor(np.asarray(kpts), dtype=torch.float64)
    if isinstance(crop, Mapping) and "affine" not in crop and "input_size" not in crop:
        crop = {**crop, "input_size": tuple(input_size)}
    if crop is not None:
        kpts = crop_to_image(kpts, crop)
    return kpts.float(), torch.as_tensor(np.asarray(scores)).float()
