"""Task models of the official Sapiens2 configs: a backbone plus a task head.

Each estimator is built from the official config dict (``backbone`` and ``decode_head`` sub-configs,
built through ``sapiens2.registry.MODELS``; ``loss_decode`` in the head config is kept but unused).
``estimator(x)`` returns the raw head output, exactly what the official model computes
(pointmap: ``(pointmap, scale)``); ``estimator.predict(x, ...)`` runs it without gradients and
post-processes the result (:mod:`sapiens2.models.postprocess`). Inputs are normalised images
B x 3 x H x W as the official data preprocessor gives them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sapiens2.models import postprocess as pp
from sapiens2.reference import keypoints308
from sapiens2.registry import MODELS, build_from_cfg_checked


def _build(cfg: dict | nn.Module, what: str) -> nn.Module:
    if isinstance(cfg, nn.Module):
        return cfg
    if not isinstance(cfg, dict):
        raise TypeError(f"{what} must be a config dict or an nn.Module, got {type(cfg).__name__}")
    return build_from_cfg_checked(MODELS, dict(cfg))


class TaskEstimator(nn.Module):
    """Backbone + head; see the module docstring.

    Args:
        backbone: backbone config dict (e.g. ``dict(type='Sapiens2', arch=..., out_type='featmap')``)
            or a built module returning a tuple of B x C x h x w feature maps.
        decode_head: head config dict or a built head.
        train_cfg: accepted for config compatibility; unused.
        test_cfg: accepted for config compatibility; stored.
        data_preprocessor: accepted for config compatibility; unused (inputs come normalised).
        init_cfg: accepted for config compatibility; unused.
    """

    task = ""

    def __init__(self, backbone: dict | nn.Module, decode_head: dict | nn.Module,
                 train_cfg: dict | None = None, test_cfg: dict | None = None,
                 data_preprocessor: dict | None = None, init_cfg: dict | None = None) -> None:
        super().__init__()
        self.backbone = _build(backbone, "backbone")
        self.decode_head = _build(decode_head, "decode_head")
        self.test_cfg = dict(test_cfg or {})

    def extract_feat(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Backbone features (a tuple with one B x C x h x w map per out index)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{type(self).__name__}: expected input images B x C x H x W, got {got}")
        feats = self.backbone(x)
        return tuple(feats) if isinstance(feats, (tuple, list)) else (feats,)

    def forward(self, x: torch.Tensor):
        """Raw head output for normalised images ``x`` (B x 3 x H x W)."""
        return self.decode_head(self.extract_feat(x))


@MODELS.register_module()
class PoseTopdownEstimator(TaskEstimator):
    """Top-down 308-keypoint pose estimator: heatmaps at 1/4 resolution of the person crop."""

    task = "pose"

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, flip_test: bool = True,
                flip_pairs: Sequence[Sequence[int]] | None = None, crop=None,
                blur_kernel_size: int = 11) -> dict[str, torch.Tensor]:
        """Keypoints and scores of person crops.

        Args:
            x: normalised crops B x 3 x H x W.
            flip_test: also run the mirrored crops and fuse the heatmaps (the official protocol).
            flip_pairs: left/right keypoint pairs; None uses the 308-keypoint vocabulary's pairs.
            crop: optional crop meta mapping crop pixels back to image pixels (see
                :func:`sapiens2.models.postprocess.crop_to_image`).
            blur_kernel_size: Gaussian kernel of the UDP refinement.

        Returns:
            ``keypoints`` B x K x 2 (image pixels if ``crop`` is given, else crop pixels), ``scores``
            B x K and the (fused) ``heatmaps`` B x K x h x w.
        """
        heatmaps = self(x)
        if flip_test:
            if flip_pairs is None:
                vocab = keypoints308()
                if heatmaps.shape[1] != int(vocab["num_keypoints"]):
                    raise ValueError(f"flip test: the model predicts {heatmaps.shape[1]} keypoints; pass "
                                     f"flip_pairs for a vocabulary other than keypoints308")
                flip_pairs = vocab["flip_pairs"]
            heatmaps = pp.fuse_flip_heatmaps(heatmaps, self(x.flip(-1)), flip_pairs)
        keypoints, scores = pp.decode_pose_heatmaps(heatmaps, input_size=(x.shape[-1], x.shape[-2]),
                                                    crop=crop, blur_kernel_size=blur_kernel_size)
        return {"keypoints": keypoints, "scores": scores, "heatmaps": heatmaps}


@MODELS.register_module()
class SegEstimator(TaskEstimator):
    """29-class body-part segmentation: logits at input resolution."""

    task = "seg"

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, size: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """``labels`` B x H x W (logits resized bilinearly to ``size`` = (H, W), then argmax), ``logits``."""
        logits = self(x)
        return {"labels": pp.seg_logits_to_labels(logits, size), "logits": logits}


@MODELS.register_module()
class NormalEstimator(TaskEstimator):
    """Surface normals in the camera frame (unnormalised head output)."""

    task = "normal"

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, size: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """``normals`` B x 3 x H x W of unit length (resized bilinearly to ``size`` first)."""
        return {"normals": pp.unit_normals(self(x), size)}


@MODELS.register_module()
class PointmapEstimator(TaskEstimator):
    """Camera-frame pointmap: a canonical pointmap and a per-image scale.

    Args:
        canonical_focal_length: focal length (pixels) of the canonical camera the pointmap is
            expressed in (768 in the official models).
        **kwargs: see :class:`TaskEstimator`.
    """

    task = "pointmap"

    def __init__(self, backbone: dict | nn.Module, decode_head: dict | nn.Module,
                 canonical_focal_length: float = pp.CANONICAL_FOCAL_LENGTH, **kwargs) -> None:
        super().__init__(backbone, decode_head, **kwargs)
        if not canonical_focal_length > 0:
            raise ValueError(f"canonical_focal_length must be positive, got {canonical_focal_length}")
        self.canonical_focal_length = float(canonical_focal_length)

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, K=None, size: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """Points in the canonical camera, and in the real camera when its intrinsics are given.

        Args:
            x: normalised images B x 3 x H x W.
            K: optional 3 x 3 or B x 3 x 3 intrinsics of ``x`` (after any resize/pad).
            size: optional (H, W) to resize the pointmap to.

        Returns:
            ``pointmap_canonical`` (scale applied) B x 3 x H x W, ``scale`` B x 1, and with ``K`` also
            ``points`` B x 3 x H x W in the camera frame (the training data's units, metres).
        """
        pointmap, scale = self(x)
        out = {"pointmap_canonical": pp.pointmap_to_metric(pointmap, scale, None, size=size), "scale": scale}
        if K is not None:
            out["points"] = pp.pointmap_to_metric(pointmap, scale, K, self.canonical_focal_length, size=size)
        return out


@MODELS.register_module()
class AlbedoEstimator(TaskEstimator):
    """Diffuse albedo (3 channels)."""

    task = "albedo"

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, size: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """``albedo`` B x 3 x H x W clamped to [0, 1] (resized bilinearly to ``size`` first)."""
        return {"albedo": pp.clamp_albedo(self(x), size)}


ESTIMATORS = {cls.task: cls for cls in (PoseTopdownEstimator, SegEstimator, NormalEstimator,
                                        PointmapEstimator, AlbedoEstimator)}
