"""Input checks and small tensor helpers shared by the dense evaluators.

Example:
    >>> import torch
    >>> pred = resize_to(torch.zeros(1, 3, 4, 4), (8, 8))
    >>> tuple(pred.shape)
    (1, 3, 8, 8)
    >>> as_mask(torch.ones(1, 1, 8, 8), "mask", (1, 8, 8)).dtype
    torch.bool
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def as_tensor(x, name: str) -> torch.Tensor:
    """Accept a tensor or an ndarray; anything else raises a TypeError naming ``name``."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise TypeError(f"{name}: expected a torch.Tensor or numpy array, got {type(x).__name__}")


def check_bchw(x, name: str, channels: int | None = None) -> torch.Tensor:
    """Check that ``x`` is a floating B x C x H x W tensor (C == ``channels`` when given).

    Raises:
        ValueError: wrong rank, channel count or dtype; the message names ``name``.
    """
    x = as_tensor(x, name)
    if x.dim() != 4:
        raise ValueError(f"{name}: expected a B x C x H x W tensor, got shape {tuple(x.shape)}")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(
            f"{name}: expected {channels} channels (B x {channels} x H x W), got {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if x.shape[0] == 0 or x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"{name}: empty tensor of shape {tuple(x.shape)}")
    return x


def check_same_batch(pred: torch.Tensor, gt: torch.Tensor, pred_name: str, gt_name: str) -> None:
    """Raise a ValueError naming both tensors when their batch sizes differ."""
    if pred.shape[0] != gt.shape[0]:
        raise ValueError(
            f"{pred_name} has batch size {pred.shape[0]} but {gt_name} has {gt.shape[0]} "
            f"(shapes {tuple(pred.shape)} and {tuple(gt.shape)})"
        )


def as_mask(mask, name: str, shape_bhw: tuple[int, int, int]) -> torch.Tensor:
    """Convert a mask (B x H x W or B x 1 x H x W; bool, integer or float > 0.5) to bool B x H x W.

    Raises:
        ValueError: the mask's shape does not match ``shape_bhw``.
    """
    m = as_tensor(mask, name)
    if m.dim() == 4 and m.shape[1] == 1:
        m = m[:, 0]
    if tuple(m.shape) != tuple(shape_bhw):
        raise ValueError(
            f"{name}: expected B x H x W = {tuple(shape_bhw)} (or B x 1 x H x W), got {tuple(mask.shape)}"
        )
    if m.dtype == torch.bool:
        return m
    return m > 0.5


def resize_to(pred: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize (``align_corners=False``) of B x C x h x w to ``size`` (H, W); no-op if equal."""
    if tuple(pred.shape[-2:]) == tuple(size):
        return pred
    return F.interpolate(pred, size=tuple(size), mode="bilinear", align_corners=False)


def require_nonempty(valid: torch.Tensor, name: str) -> None:
    """Raise a ValueError naming ``name`` and the samples whose B x H x W mask has no pixel."""
    empty = (~valid.flatten(1).any(1)).nonzero().flatten()
    if empty.numel():
        raise ValueError(
            f"{name}: empty mask (no valid pixel) for batch sample(s) {empty.tolist()[:10]}; "
            "pass allow_empty_masks=True to skip such samples"
        )


def nonfinite_pixels(x: torch.Tensor) -> torch.Tensor:
    """B x H x W bool: pixels where any channel of B x C x H x W ``x`` is NaN or Inf."""
    return ~torch.isfinite(x).all(1)


def angle_key(t: float) -> str:
    """Official key of an angle threshold: 11.25 -> ``within_11_25_deg``, 5 -> ``within_5_0_deg``."""
    return "within_" + str(float(t)).replace(".", "_") + "_deg"


def prepare_dense_batch(
    pred, gt, mask, task: str, channels: int | None, allow_empty_masks: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check and align one batch of a dense task (the common start of ``batch_stats``).

    Args:
        pred: B x C x h x w prediction (named ``pred_<task>`` in errors).
        gt: B x C x H x W ground truth (named ``gt_<task>``).
        mask: B x H x W (or B x 1 x H x W) GT mask.
        task: task word used in the tensor names of error messages.
        channels: required channel count C, or ``None`` to accept the GT's.
        allow_empty_masks: do not raise on samples whose mask is empty.

    Returns:
        ``(pred, gt, bad, valid)``: the prediction resized to the GT size (still with any
        non-finite values), the GT, the B x H x W mask pixels with a non-finite prediction, and the
        mask pixels without one.
    """
    gt = check_bchw(gt, f"gt_{task}", channels=channels)
    pred = check_bchw(pred, f"pred_{task}", channels=gt.shape[1])
    check_same_batch(pred, gt, f"pred_{task}", f"gt_{task}")
    b, _, h, w = gt.shape
    m = as_mask(mask, "mask", (b, h, w)).to(gt.device)
    if not allow_empty_masks:
        require_nonempty(m, "mask")
    pred = resize_to(pred.to(gt.device), (h, w))
    bad = nonfinite_pixels(pred) & m
    return pred, gt, bad, m & ~bad


def pixel_sample_ids(valid: torch.Tensor) -> torch.Tensor:
    """1-D batch index of every True pixel of a B x H x W mask (in ``valid[...]`` order)."""
    b, h, w = valid.shape
    return torch.arange(b, device=valid.device).view(b, 1, 1).expand(b, h, w)[valid]


def per_sample_sum(values: torch.Tensor, sample: torch.Tensor, batch: int) -> torch.Tensor:
    """Sum the rows of ``values`` (N x ...) into ``batch`` rows by their sample id (N)."""
    out = torch.zeros((batch, *values.shape[1:]), dtype=values.dtype, device=values.device)
    return out.index_add_(0, sample, values)


def unit_angle_deg(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle in degrees between unit vectors along dim 1: ``acos(clamp(dot, -1, 1))``."""
    return torch.rad2deg(torch.acos((a * b).sum(1).clamp(-1.0, 1.0)))


def require_valid_pixels(state: dict[str, torch.Tensor], evaluator: str) -> int:
    """The pooled ``pixels`` count; a ValueError naming ``evaluator`` when it is zero."""
    n = int(state["pixels"])
    if n == 0:
        raise ValueError(
            f"{evaluator}: no valid pixel (samples: {int(state['num_samples'])}, "
            f"non-finite predicted pixels: {int(state['nonfinite_pred_pixels'])})"
        )
    return n
