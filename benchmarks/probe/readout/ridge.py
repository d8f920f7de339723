"""Closed-form multi-output ridge regression from streamed sufficient statistics.

Features are standardised per channel and centred (the intercept is not penalised); the penalty is
``alpha * n`` in those units, so ``alpha`` reads the same for any number of rows. ``alpha`` is chosen
from a grid on a held-out fold of the statistics: one eigendecomposition of the fit fold's Gram
matrix scores every ``alpha`` without another solve, then the model is refit on all rows. The sums
themselves are accumulated by :mod:`benchmarks.probe.readout.ridge_sums`.

Example:
    >>> import torch
    >>> from benchmarks.probe.readout.ridge import fit_ridge
    >>> from benchmarks.probe.readout.ridge_sums import RidgeStats
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(200, 5, generator=g)
    >>> y = x @ torch.arange(10.0).reshape(5, 2) + 3.0
    >>> stats = RidgeStats(5, 2)
    >>> stats.update(x[:150], y[:150], fold=0)
    >>> stats.update(x[150:], y[150:], fold=1)
    >>> fit = fit_ridge(stats, alphas=(1e-8, 1e-2, 1.0))
    >>> fit.alpha, round(float(fit.bias[0]), 4)
    (1e-08, 3.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from benchmarks.probe.readout.ridge_sums import FoldSums, PositionSums, RidgeStats


@dataclass
class RidgeFit:
    """A fitted linear map ``y = x @ weight + bias``.

    Attributes:
        weight: C x O (float32, original feature units).
        bias: O.
        alpha: the chosen penalty (per row, standardised units).
        val_loss: held-out mean squared error per ``alpha`` (empty without a held-out fold).
        val_r2: held-out R^2 (fraction of the target variance explained) at the chosen ``alpha``.
    """

    weight: torch.Tensor
    bias: torch.Tensor
    alpha: float
    val_loss: dict = field(default_factory=dict)
    val_r2: float | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias.to(x), x, self.weight.to(x))


def _centred(f: FoldSums, mx: Tensor, my: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Gram, cross term and per-output squared sum of ``f`` about the means ``mx``, ``my``."""
    xx = f.xx - torch.outer(mx, f.sx) - torch.outer(f.sx, mx) + f.n * torch.outer(mx, mx)
    xy = f.xy - torch.outer(mx, f.sy) - torch.outer(f.sx, my) + f.n * torch.outer(mx, my)
    yy = f.yy - 2 * my * f.sy + f.n * my.square()
    return xx, xy, yy


def _scales(sum_sq: torch.Tensor, n: int) -> torch.Tensor:
    """Per-channel std from centred sums of squares; near-constant channels keep scale 1."""
    sd = (sum_sq.clamp_min(0) / max(n, 1)).sqrt()
    floor = 1e-3 * sd[sd > 0].median() if bool((sd > 0).any()) else torch.tensor(1.0, dtype=sd.dtype)
    return torch.where(sd < floor, torch.ones_like(sd), sd)


def solve_fold(f: FoldSums, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(C x O weights, O bias) of the ridge fit of the sums ``f`` alone at penalty ``alpha``
    (``f``'s row units; zero weights at the infinite penalty)."""
    mx, my = f.sx / f.n, f.sy / f.n
    if math.isinf(alpha):
        return torch.zeros_like(f.xy), my
    xx, xy, _ = _centred(f, mx, my)
    sd = _scales(xx.diagonal(), f.n)
    g = xx / torch.outer(sd, sd)
    rhs = xy / sd[:, None]
    chol, info = torch.linalg.cholesky_ex(g + alpha * f.n * torch.eye(len(g), dtype=g.dtype, device=g.device))
    if int(info) == 0:
        w = torch.cholesky_solve(rhs, chol)
    else:  # rounding left the Gram slightly indefinite: clamp its spectrum at 0 instead
        evals, vecs = torch.linalg.eigh(g)
        w = vecs @ ((vecs.T @ rhs) / (evals.clamp_min(0) + alpha * f.n)[:, None])
    w = w / sd[:, None]
    return w, my - mx @ w


_EIG_CACHE: dict = {}


def clear_shared() -> None:
    """Drop the decompositions and centred Grams kept for the tasks of one feature stream."""
    _EIG_CACHE.clear()
    _CENTRED_GRAMS.clear()


def validation_curve(stats: RidgeStats, alphas: Sequence[float],
                     max_outputs: int = 1536) -> tuple[dict, float]:
    """Held-out mean squared error per alpha (fit on fold 0, scored on fold 1) and the held-out variance.

    With more than ``max_outputs`` outputs the curve is measured on every k-th output (an unbiased
    estimate of the all-output curve at a fraction of the cost). ``alpha = inf`` is the intercept alone.
    """
    fit, val = stats.folds[0], stats.folds[1]
    cols = torch.arange(0, stats.out_dim, max(1, -(-stats.out_dim // max_outputs)))
    fit = FoldSums(fit.n, fit.sx, fit.sy[cols], fit.xx, fit.xy[:, cols], fit.yy[cols])
    val = FoldSums(val.n, val.sx, val.sy[cols], val.xx, val.xy[:, cols], val.yy[cols])
    mx, my = fit.sx / fit.n, fit.sy / fit.n
    xx, xy, _ = _centred(fit, mx, my)
    # the eigendecomposition and the held-out Gram in its basis depend on the features alone: the
    # tasks reading the same feature rows (same key and folds) share them
    key = (stats.x_key, fit.n, val.n) if stats.x_key is not None else None
    vxx, vxy, vyy = _centred(val, mx, my)
    if key is not None and key in _EIG_CACHE:
        sd, evals, vecs, m = _EIG_CACHE[key]
    else:
        sd = _scales(xx.diagonal(), fit.n)
        evals, vecs = torch.linalg.eigh(xx / torch.outer(sd, sd))
        m = vecs.T @ (vxx / torch.outer(sd, sd)) @ vecs
        if key is not None:
            _EIG_CACHE.clear()
            _EIG_CACHE[key] = (sd, evals, vecs, m)
    p = vecs.T @ (xy / sd[:, None])  # C x O in the eigenbasis
    q = vecs.T @ (vxy / sd[:, None])
    pq, ms = (p * q).sum(1), m * (p @ p.T)
    curve = {}
    for a in alphas:
        if math.isinf(a):
            curve[a] = float(vyy.sum() / max(val.n, 1))
            continue
        d = 1.0 / (evals.clamp_min(0) + a * fit.n)
        curve[float(a)] = float((vyy.sum() - 2 * (d * pq).sum() + d @ ms @ d) / max(val.n, 1))
    var = float((val.yy - val.sy.square() / max(val.n, 1)).sum() / max(val.n, 1))
    return curve, var


def fit_ridge(stats: RidgeStats, alphas: Sequence[float] = (1e-6, 1e-4, 1e-2, 1.0),
              total: FoldSums | None = None) -> RidgeFit:
    """Choose ``alpha`` on the held-out fold (when it has rows), then fit on all rows.

    Near-ties go to the smaller penalty. With an empty held-out fold the smallest grid value is used.

    Args:
        stats: the accumulated :class:`RidgeStats`.
        alphas: penalty grid (per row, standardised units); ``inf`` (the intercept alone) is added.
        total: the sums the final fit uses (default: every fold of ``stats`` added); a per-position
            centred fit (:func:`within_positions`) centres them on the all-fold means instead.

    Returns:
        The :class:`RidgeFit` refit on every fold.
    """
    alphas = sorted({float(a) for a in alphas} | {math.inf})
    curve, r2 = {}, None
    alpha = alphas[0]
    if len(stats.folds) > 1 and stats.folds[1].n > 0 and stats.folds[0].n > 0 and len(alphas) > 1:
        curve, var = validation_curve(stats, alphas)
        alpha = _pick(curve, var)
        r2 = 1.0 - curve[alpha] / var if var > 0 else None
    total = stats.total() if total is None else total
    if total.n == 0:
        raise ValueError("ridge fit: no rows")
    w, b = solve_fold(total, alpha)
    if stats.shift is not None:
        b = b - stats.shift[0] @ w
    return RidgeFit(w.float(), b.float(), alpha, curve, r2)


def _pick(curve: dict, var: float) -> float:
    """The alpha of least held-out error; near-ties (within 1e-9 of the target variance, i.e. at the
    rounding floor of the statistics, as when the targets are exactly linear) go to the smaller one."""
    best = min(curve.values())
    return min(a for a, v in curve.items() if v <= best + 1e-9 * abs(var) + 1e-300)


def _centred_gram(xx: Tensor, n_p: Tensor, sx_p: Tensor, mx_p: Tensor, own: bool) -> Tensor:
    """``x^T x`` about the per-position means ``mx_p``: ``xx - mx_p^T sx_p - a^T mx_p`` with
    ``a = sx_p - n_p mx_p`` (0 when the means are the rows' own: ``own``)."""
    out = xx - mx_p.T @ sx_p
    return out if own else out - (sx_p - n_p[:, None] * mx_p).T @ mx_p


def _about_positions(f: FoldSums, n_p: Tensor, sx_p: Tensor, sy_p: Tensor, mx_p: Tensor, my_p: Tensor,
                     own: bool, xx: Tensor | None = None) -> FoldSums:
    """The sums of ``f`` (whose per-position sums are ``n_p``, ``sx_p``, ``sy_p``) about the
    per-position means ``mx_p``, ``my_p``: the sums of ``x - mx_p`` and ``y - my_p`` over its rows.

    ``own``: the means are ``f``'s own (one product each for the Gram and the cross term instead of
    two). ``xx``: the centred Gram when already computed (it depends on the features alone, so the
    tasks reading one feature stream share it: :func:`_shared_gram`).
    """
    nmx, nmy = n_p[:, None] * mx_p, n_p[:, None] * my_p
    xx = _centred_gram(f.xx, n_p, sx_p, mx_p, own) if xx is None else xx
    xy = f.xy - mx_p.T @ sy_p
    if not own:
        xy = xy - (sx_p - nmx).T @ my_p
    return FoldSums(f.n, f.sx - nmx.sum(0), f.sy - nmy.sum(0), xx, xy,
                 f.yy - 2 * (my_p * sy_p).sum(0) + (nmy * my_p).sum(0))


_CENTRED_GRAMS: dict = {}  # (feature key, which sums, row counts) -> centred Gram; one stream at a time


def _shared_gram(key: tuple | None, f: FoldSums, n_p: Tensor, sx_p: Tensor, mx_p: Tensor,
                 own: bool) -> Tensor | None:
    """:func:`_centred_gram` of ``f``, once per feature stream (``key``): every task reading the
    stream reuses it. None without a key (then each task computes its own)."""
    if key is None:
        return None
    if key not in _CENTRED_GRAMS:
        if _CENTRED_GRAMS and next(iter(_CENTRED_GRAMS))[0] != key[0]:
            _CENTRED_GRAMS.clear()
        _CENTRED_GRAMS[key] = _centred_gram(f.xx, n_p, sx_p, mx_p, own)
    return _CENTRED_GRAMS[key]


def within_positions(stats: RidgeStats, pos: PositionSums) -> tuple[RidgeStats, FoldSums]:
    """Ridge statistics centred per position: (held-out search statistics, final-fit sums).

    The fit then predicts ``y = my_p + (x - mx_p) W`` at position ``p``: the train mean of ``y`` at
    that position (the feature-free floor, reached exactly at an infinite penalty) plus what the
    features add beyond their own mean there. For the penalty search fold 0 is centred on its own
    per-position means and fold 1 on fold 0's (an honest held-out error of the floor itself); the
    final fit centres every row on the all-fold means.
    """
    if len(stats.folds) != pos.n.shape[0] or pos.in_dim != stats.in_dim or pos.out_dim != stats.out_dim:
        raise ValueError("within_positions: the ridge and position statistics do not match")
    dev = stats.folds[0].xy.device if stats.folds[0].xy is not None else "cpu"
    n0, mx0, my0 = (t.to(dev) for t in pos.means([0]))
    counts = tuple(f.n for f in stats.folds)
    key = None if stats.x_key is None else f"{stats.x_key}|per-position"

    def gram_key(which: int | str) -> tuple | None:
        return None if key is None else (key, which, counts)

    folds = []
    for k, f in enumerate(stats.folds):
        if f.n == 0:
            folds.append(FoldSums())
            continue
        n_k, sx_k = pos.n[k].to(dev), pos.sx[k].to(dev)
        xx = _shared_gram(gram_key(k), f, n_k, sx_k, mx0, own=k == 0)
        folds.append(_about_positions(f, n_k, sx_k, pos.sy[k].to(dev), mx0, my0, own=k == 0, xx=xx))
    out = RidgeStats(stats.in_dim, stats.out_dim, len(stats.folds), x_key=key,
                     product_dtype=stats.product_dtype)
    out.folds = folds
    n, mx, my = (t.to(dev) for t in pos.means())
    all_f, sx = stats.total(), pos.sx.sum(0).to(dev)
    xx = _shared_gram(gram_key("all"), all_f, n, sx, mx, own=True)
    total = _about_positions(all_f, n, sx, pos.sy.sum(0).to(dev), mx, my, own=True, xx=xx)
    return out, total
