"""Input checks and small tensor helpers shared by the dense evaluators.

Accepted layouts (``C`` = the task's channel count): ``B x C x H x W`` and ``B x H x W x C``
batches, and unbatched ``C x H x W`` / ``H x W x C`` samples (then the mask is ``H x W``).
Channels-first wins when both readings fit.

Non-finite values (the NaN policy, see docs/evaluators.md): a GT pixel that is NaN/Inf leaves
the mask and is counted (``nonfinite_gt_pixels``); a predicted pixel that is NaN/Inf inside the
mask is a failure, scored with the task's worst-case value and counted (``nonfinite_pred_pixels``),
so a missing prediction never improves a score.

Example:
    >>> import torch
    >>> pred = resize_to(torch.zeros(1, 3, 4, 4), (8, 8))
    >>> tuple(pred.shape)
    (1, 3, 8, 8)
    >>> as_mask(torch.ones(1, 1, 8, 8), "mask", (1, 8, 8)).dtype
    torch.bool
    >>> tuple(to_bchw(torch.zeros(5, 6, 3), "gt", 3, unbatched=True).shape)  # H x W x 3, one sample
    (1, 3, 5, 6)
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

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


def _layouts(channels: int | None) -> str:
    c = "C" if channels is None else str(channels)
    return f"B x {c} x H x W or B x H x W x {c} (one sample: {c} x H x W or H x W x {c})"


def to_bchw(x, name: str, channels: int | None = None, unbatched: bool | None = None) -> torch.Tensor:
    """A floating ``B x C x H x W`` view of ``x`` given in any accepted layout.

    Args:
        x: tensor or ndarray.
        name: tensor name for messages.
        channels: required C (None: 1 or 3 for the channels-last and unbatched forms, any C for
            a 4-D channels-first batch).
        unbatched: True when ``x`` is one sample (3-D), False for a batch (4-D), None: by rank.

    Raises:
        ValueError: wrong rank, channel count or dtype, or an empty tensor; the message says what
            to pass.
    """
    x = as_tensor(x, name)
    if unbatched is None:
        unbatched = x.dim() == 3
    want = 3 if unbatched else 4
    if x.dim() != want:
        kind = "one sample" if unbatched else "a batch"
        raise ValueError(f"{name}: expected {kind} as {_layouts(channels)}, got shape {tuple(x.shape)}")
    if unbatched:
        x = x.unsqueeze(0)
    cands = (channels,) if channels is not None else (1, 3)
    if channels is None and not unbatched and x.shape[-1] not in cands:
        pass  # a channels-first batch with any C
    elif x.shape[1] in cands:
        pass
    elif x.shape[-1] in cands:
        x = x.permute(0, 3, 1, 2)
    else:
        raise ValueError(f"{name}: expected {_layouts(channels)}, got shape {tuple(x.shape[unbatched:])}")
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if x.shape[0] == 0 or x.shape[2] == 0 or x.shape[3] == 0:
        raise ValueError(f"{name}: empty tensor of shape {tuple(x.shape)}")
    return x


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


def count_true(mask: torch.Tensor) -> torch.Tensor:
    """Per-sample int64 counts of the True pixels of a B x ... bool tensor.

    On CPU NumPy's ``count_nonzero`` per sample: PyTorch's bool ``sum``/``any`` over a dimension
    was measured 100x+ slower (a cast to int64 on a slow path, and a thread-pool wait when busy).

    Example:
        >>> count_true(torch.tensor([[True, True], [False, True]])).tolist()
        [2, 1]
    """
    if mask.device.type == "cpu":
        a = mask.detach().numpy()
        return torch.tensor([np.count_nonzero(x) for x in a], dtype=torch.int64)
    return mask.flatten(1).sum(1)


def require_nonempty(valid: torch.Tensor, name: str) -> None:
    """Raise a ValueError naming ``name`` and the samples whose B x H x W mask has no pixel."""
    empty = (count_true(valid) == 0).nonzero().flatten()
    if empty.numel():
        raise ValueError(
            f"{name}: empty mask (no valid pixel) for batch sample(s) {empty.tolist()[:10]}; "
            "pass allow_empty_masks=True to skip such samples"
        )


def _all_finite(x: torch.Tensor) -> bool:
    """True when the sum of ``x`` is finite (NaN/Inf propagate into it; an overflow says False)."""
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return bool(np.isfinite(x.detach().numpy().sum()))  # one thread, no thread-pool wait
    return bool(torch.isfinite(x.sum()))


def nonfinite_or_none(x: torch.Tensor) -> torch.Tensor | None:
    """B x H x W bool: pixels where any channel of B x C x H x W ``x`` is NaN/Inf; None when none is.

    One cheap global check first; the per-pixel map only when something is non-finite.
    """
    if _all_finite(x):  # an overflow of the sum goes on below
        return None
    fin = torch.isfinite(x)
    ok = fin[:, 0].clone()
    for c in range(1, x.shape[1]):
        ok &= fin[:, c]
    return None if bool(ok.all()) else ~ok


def angle_key(t: float) -> str:
    """Official key of an angle threshold: 11.25 -> ``within_11_25_deg``, 5 -> ``within_5_0_deg``."""
    return "within_" + str(float(t)).replace(".", "_") + "_deg"


@dataclass
class DenseBatch:
    """One checked, aligned batch of a dense task (see :func:`prepare_dense_batch`).

    Attributes:
        pred: B x C x H x W prediction at GT size, non-finite values replaced by 0.
        gt: B x C x H x W GT, non-finite values replaced by 0.
        valid: mask pixels with a finite GT and a finite prediction.
        bad: mask pixels with a finite GT and a non-finite prediction (scored as failures).
        scored: ``valid | bad``: the mask without non-finite GT.
        gt_bad: mask pixels whose GT is non-finite (left out, counted).
        pred_nonfinite: B x H x W non-finite predicted pixels anywhere, or None when there is none.
        gt_nonfinite: B x H x W non-finite GT pixels anywhere, or None when there is none.
    """

    pred: torch.Tensor
    gt: torch.Tensor
    valid: torch.Tensor
    bad: torch.Tensor
    scored: torch.Tensor
    gt_bad: torch.Tensor
    pred_nonfinite: torch.Tensor | None
    gt_nonfinite: torch.Tensor | None

    def counts(self) -> dict[str, torch.Tensor]:
        """Per-sample rows ``pixels`` (scored), ``nonfinite_pred_pixels``, ``nonfinite_gt_pixels``."""
        zeros = torch.zeros(self.scored.shape[0], dtype=torch.int64, device=self.scored.device)
        return {
            "pixels": count_true(self.scored),
            "nonfinite_pred_pixels": zeros if self.pred_nonfinite is None else count_true(self.bad),
            "nonfinite_gt_pixels": zeros if self.gt_nonfinite is None else count_true(self.gt_bad),
        }


def prepare_dense_batch(
    pred, gt, mask, task: str, channels: int | None, allow_empty_masks: bool
) -> DenseBatch:
    """Check and align one batch (or one unbatched sample) of a dense task.

    Args:
        pred: prediction (``pred_<task>`` in errors), any accepted layout; resized to the GT size.
        gt: ground truth (``gt_<task>``), any accepted layout.
        mask: B x H x W (or B x 1 x H x W; H x W for one sample) GT mask.
        task: task word used in the tensor names of error messages.
        channels: required channel count C, or ``None`` to accept the GT's.
        allow_empty_masks: do not raise on samples without a scored pixel.

    Returns:
        A :class:`DenseBatch`.
    """
    gt_t = as_tensor(gt, f"gt_{task}")
    pred_t = as_tensor(pred, f"pred_{task}")
    unbatched = gt_t.dim() == 3
    if pred_t.dim() != gt_t.dim() and {pred_t.dim(), gt_t.dim()} <= {3, 4}:
        raise ValueError(
            f"pred_{task} has shape {tuple(pred_t.shape)} but gt_{task} has {tuple(gt_t.shape)}: pass both "
            f"as batches ({_layouts(channels).split(' (')[0]}) or both as one sample"
        )
    gt = to_bchw(gt_t, f"gt_{task}", channels, unbatched)
    pred = to_bchw(pred_t, f"pred_{task}", gt.shape[1], unbatched)
    check_same_batch(pred, gt, f"pred_{task}", f"gt_{task}")
    b, _, h, w = gt.shape
    m = as_tensor(mask, "mask")
    if unbatched and m.dim() in (2, 3):
        m = m.unsqueeze(0)
    m = as_mask(m, "mask", (b, h, w)).to(gt.device)
    pred = resize_to(pred.to(gt.device), (h, w))
    gt_nf = nonfinite_or_none(gt)
    pred_nf = nonfinite_or_none(pred)
    gt, gt_bad, scored = _split_nonfinite(gt, gt_nf, m)
    if not allow_empty_masks:
        require_nonempty(m, "mask")
        if gt_nf is not None:
            require_nonempty(scored, f"gt_{task}: every mask pixel has a non-finite GT value;")
    pred, bad, valid = _split_nonfinite(pred, pred_nf, scored)
    return DenseBatch(pred, gt, valid, bad, scored, gt_bad, pred_nf, gt_nf)


def _split_nonfinite(x: torch.Tensor, nonfinite: torch.Tensor | None, within: torch.Tensor):
    """``x`` with non-finite values zeroed, and the ``within`` pixels split into (non-finite, finite)."""
    if nonfinite is None:  # a read-only all-False view: no B x H x W allocation
        return x, torch.zeros((), dtype=torch.bool, device=within.device).expand_as(within), within
    x = torch.where(torch.isfinite(x), x, torch.zeros((), dtype=x.dtype, device=x.device))
    return x, within & nonfinite, within & ~nonfinite


@contextmanager
def single_thread(device: torch.device):
    """Run the enclosed CPU tensor code on one intra-op thread (restored afterwards).

    The per-sample loops work on arrays of a few hundred thousand values: too small for
    PyTorch's thread pool to pay, and on a busy machine every op then waits for a second thread
    to be scheduled (measured: pointmap 10-20x slower with 2 threads at load 9 on 2 cores).
    """
    n = torch.get_num_threads()
    if device.type != "cpu" or n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def fsum(x: torch.Tensor) -> torch.Tensor:
    """Sum of the values of one sample, accumulated in float64 (a float64 scalar)."""
    return x.sum(dtype=torch.float64)


def flat_nonzero(mask: torch.Tensor) -> torch.Tensor:
    """int64 flat indices of the True values of a bool tensor (NumPy's ``flatnonzero`` on CPU: ~2x faster).

    Example:
        >>> flat_nonzero(torch.tensor([[True, False], [False, True]])).tolist()
        [0, 3]
    """
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return mask.flatten().nonzero().squeeze(1)


def take_columns(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Columns ``idx`` of ``x`` viewed as C x N: ``x.reshape(C, -1)[:, idx]`` without boolean indexing.

    Example:
        >>> take_columns(torch.arange(8.).view(2, 2, 2), torch.tensor([0, 3])).tolist()
        [[0.0, 3.0], [4.0, 7.0]]
    """
    x = x.reshape(x.shape[0], -1)
    if x.device.type == "cpu":  # NumPy's take: ~25% faster than index_select here
        return torch.from_numpy(np.take(x.numpy(), idx.numpy(), axis=1))
    return x.index_select(1, idx)


def row_sums_f64(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """Float64 sums of the rows of a C x N tensor: float32 sums of ``block`` values, added in float64.

    PyTorch's CPU ``x.sum(1, dtype=torch.float64)`` casts element by element on a slow path (measured
    about 25x slower than a float32 sum of the same rows). A float32 sum of 1024 values is off by
    about 1e-7 relative at most, and the block sums are accumulated in float64, so the row sums stay
    within a few 1e-7 of a float64 sum (measured on random rows: < 1e-8), far inside the golden
    tolerance (1e-4); a float32 sum of a whole row of 10^6 values drifts further.

    Example:
        >>> x = torch.full((2, 3000), 0.5)
        >>> row_sums_f64(x).tolist()
        [1500.0, 1500.0]
    """
    if x.dtype == torch.float64:
        return x.sum(1)
    c, n = x.shape
    k = n // block * block
    out = x[:, k:].double().sum(1)
    if k:
        out += x[:, :k].reshape(c, k // block, block).sum(2).double().sum(1)
    return out


def count_below(x: torch.Tensor, thresholds) -> torch.Tensor:
    """int64 counts of ``x < t`` for each threshold (NumPy's ``count_nonzero`` on CPU: 20-30x faster)."""
    if x.device.type == "cpu":
        a = x.numpy()
        return torch.tensor([int(np.count_nonzero(a < t)) for t in thresholds], dtype=torch.int64)
    return torch.stack([(x < t).sum() for t in thresholds])


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """Per-sample sum of B x H x W ``x`` over the True pixels of ``mask``, accumulated in ``dtype``."""
    return (
        torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device)).flatten(1).sum(1, dtype=dtype)
    )


def masked_count(cond: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample int64 count of pixels where both B x H x W bools are True."""
    return (cond & mask).flatten(1).sum(1)


def masked_bincount(bins: torch.Tensor, mask: torch.Tensor, nbins: int) -> torch.Tensor:
    """Per-sample histograms ``B x nbins`` of int64 ``bins`` (B x H x W, in [0, nbins)) over ``mask``."""
    b = bins.shape[0]
    sample = torch.arange(b, device=bins.device).view(b, *([1] * (bins.dim() - 1)))
    flat = torch.where(mask, bins + sample * nbins, torch.full((), b * nbins, device=bins.device))
    return torch.bincount(flat.flatten(), minlength=b * nbins + 1)[: b * nbins].view(b, nbins)


def dilate(mask: torch.Tensor, size: int) -> torch.Tensor:
    """B x H x W bool mask grown by a ``size`` x ``size`` square (odd size)."""
    return F.max_pool2d(mask[:, None].to(torch.float32), size, stride=1, padding=size // 2)[:, 0] > 0


def chan_sum(x: torch.Tensor) -> torch.Tensor:
    """``x.sum(1)`` of B x C x H x W for small C, as plane additions.

    PyTorch's CPU reductions over a short strided dimension (``sum(1)``, ``norm(dim=1)``) are
    10-50x slower than adding the C planes; the values are the same up to summation order.

    Example:
        >>> chan_sum(torch.ones(1, 3, 2, 2)).tolist()
        [[[3.0, 3.0], [3.0, 3.0]]]
    """
    out = x[:, 0].clone()
    for c in range(1, x.shape[1]):
        out += x[:, c]
    return out


def chan_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-pixel dot product along dim 1 of two B x C x H x W tensors (see :func:`chan_sum`)."""
    out = a[:, 0] * b[:, 0]
    for c in range(1, a.shape[1]):
        out.addcmul_(a[:, c], b[:, c])
    return out


def chan_norm(x: torch.Tensor) -> torch.Tensor:
    """Per-pixel L2 norm along dim 1 of B x C x H x W (see :func:`chan_sum`)."""
    return chan_dot(x, x).sqrt_()


def normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``F.normalize(x, dim=1, eps=eps)``: ``x / max(|x|, eps)`` with :func:`chan_norm`."""
    return x / chan_norm(x).clamp_min_(eps)[:, None]


def unit_angle_deg(a: torch.Tensor, b: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Angle in degrees between unit 3-vectors along ``dim`` (1 or 0).

    The official definition is ``acos(clamp(dot, -1, 1))``; this computes the same angle as
    ``atan2(|a x b|, a . b)``, which stays accurate near 0 and 180 degrees, where float32 acos is
    only good to about 0.02 degrees (so an exact prediction scores exactly 0).
    """
    if dim == 0:
        a, b = a[None], b[None]
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    cross = torch.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], 1)
    ang = torch.rad2deg(torch.atan2(chan_norm(cross), chan_dot(a, b)))
    return ang[0] if dim == 0 else ang


def require_valid_pixels(state: dict[str, torch.Tensor], evaluator: str) -> int:
    """The pooled ``pixels`` count; a ValueError naming ``evaluator`` when it is zero."""
    n = int(state["pixels"])
    if n == 0:
        extra = (
            f", non-finite GT pixels: {int(state['nonfinite_gt_pixels'])}"
            if "nonfinite_gt_pixels" in state
            else ""
        )
        raise ValueError(
            f"{evaluator}: no valid pixel (samples: {int(state['num_samples'])}, "
            f"non-finite predicted pixels: {int(state['nonfinite_pred_pixels'])}{extra})"
        )
    return n
