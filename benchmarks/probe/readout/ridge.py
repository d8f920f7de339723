"""Closed-form multi-output ridge regression from streamed sufficient statistics.

Features are standardised per channel and centred (the intercept is not penalised); the penalty is
``alpha * n`` in those units, so ``alpha`` reads the same for any number of rows. ``alpha`` is chosen
from a grid on a held-out fold of the statistics: one eigendecomposition of the fit fold's Gram
matrix scores every ``alpha`` without another solve, then the model is refit on all rows.

Example:
    >>> import torch
    >>> from benchmarks.probe.readout.ridge import RidgeStats, fit_ridge
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
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from benchmarks.probe.readout.products import add_cross


@dataclass
class _Fold:
    n: int = 0
    sx: torch.Tensor | None = None
    sy: torch.Tensor | None = None
    xx: torch.Tensor | None = None
    xy: torch.Tensor | None = None
    yy: torch.Tensor | None = None

    def add(self, other: _Fold) -> _Fold:
        if other.n == 0:
            return self
        if self.n == 0:
            return _Fold(other.n, other.sx, other.sy, other.xx, other.xy, other.yy)
        return _Fold(
            self.n + other.n,
            self.sx + other.sx,
            self.sy + other.sy,
            self.xx + other.xx,
            self.xy + other.xy,
            self.yy + other.yy,
        )


class RidgeStats:
    """Sums over rows of ``x``, ``y``, ``x x^T``, ``x y^T`` and ``y^2`` per fold, accumulated in float64.

    The matrix products of one update are computed in ``product_dtype`` (float32 halves their
    cost; the rows are shifted by ``shift`` first, so the float32 rounding is relative to the
    spread, not the mean) and added to the float64 sums; every other sum is float64 throughout.

    Args:
        in_dim: feature channels C.
        out_dim: outputs O.
        folds: number of folds (fold 0 fits, fold 1 validates the penalty).
        x_key: identity of the feature rows (same key = same rows in the same folds); fits of several
            targets on the same rows then share the fit fold's eigendecomposition.
        shift: subtracted from every row before the products (pass the feature mean: with channels
            whose mean dwarfs their spread, raw sums would cancel when centred); the fit is returned
            in unshifted units.
        product_dtype: dtype of the per-update products ``x^T x`` and ``x^T y`` (``torch.float64``
            or ``torch.float32``); they are accumulated in float64 either way.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        folds: int = 2,
        x_key: str | None = None,
        shift: torch.Tensor | None = None,
        product_dtype: torch.dtype = torch.float64,
    ):
        self.in_dim, self.out_dim, self.x_key = in_dim, out_dim, x_key
        self.product_dtype = product_dtype
        self.shift = None if shift is None else shift.double().reshape(1, in_dim)
        self.folds = [_Fold() for _ in range(folds)]

    def update(self, x: torch.Tensor, y: torch.Tensor, fold: int = 0, gram: bool = True,
               shifted: bool = False, block: int = 0, exact: bool = True) -> None:
        """Add rows ``x`` (R x C) with targets ``y`` (R x O) to ``fold``.

        ``gram=False`` leaves ``x^T x`` out (set it once per fold with :meth:`set_gram` when several
        targets share the same feature rows). ``shifted``: ``x`` is float64 and already shifted (the
        rows a shared feature stream returns), so it is not copied and shifted again. ``block``: the
        outputs come in blocks of this many columns (a map's sub-pixels) that are often all zero on a
        row (a one-hot class, a heatmap's window, a mask), used only with ``exact=False``; ``exact``
        (the default) keeps the plain product-then-add arithmetic bit for bit (:func:`add_cross`).
        """
        if x.shape[1] != self.in_dim or y.shape[1] != self.out_dim or x.shape[0] != y.shape[0]:
            raise ValueError(
                f"ridge rows: x {tuple(x.shape)} and y {tuple(y.shape)} do not match "
                f"({self.in_dim} features -> {self.out_dim} outputs)"
            )
        x64, y64 = x.double(), y.double()
        if self.shift is not None and not shifted:
            x64 = x64 - self.shift.to(x64)
        xp, yp = x64.to(self.product_dtype), y64.to(self.product_dtype)
        # the products run where the rows are (a device, for a streamed probe on one); the sums stay
        # float64 on the host, added in place (a C x O temporary per batch is hundreds of MB at 1024x768)
        f = self.folds[fold]
        if f.n == 0:
            c, o = self.in_dim, self.out_dim
            f.sx, f.sy, f.yy = (torch.zeros(d, dtype=torch.float64) for d in (c, o, o))
            f.xy = torch.zeros(c, o, dtype=torch.float64)
            f.xx = torch.zeros(c, c, dtype=torch.float64) if gram else torch.zeros((), dtype=torch.float64)
        f.n += int(x.shape[0])
        f.sx += x64.sum(0).cpu()
        f.sy += y64.sum(0).cpu()
        if gram:  # the full product: mirroring a syrk triangle per batch costs more than it saves
            add_cross(f.xx, xp, xp, exact=True)
        add_cross(f.xy, xp, yp, block, exact)
        f.yy += y64.square().sum(0).cpu()

    def set_gram(self, fold: int, xx: torch.Tensor) -> None:
        """Set fold ``fold``'s ``x^T x`` (C x C) computed elsewhere over exactly its rows."""
        if tuple(xx.shape) != (self.in_dim, self.in_dim):
            raise ValueError(f"ridge gram: expected {self.in_dim} x {self.in_dim}, got {tuple(xx.shape)}")
        self.folds[fold].xx = xx.double()

    def total(self, folds: Collection[int] | None = None) -> _Fold:
        out = _Fold()
        for i, f in enumerate(self.folds):
            if folds is None or i in folds:
                out = out.add(f)
        return out


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


def _centred(f: _Fold, mx: Tensor, my: Tensor) -> tuple[Tensor, Tensor, Tensor]:
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


def solve_fold(f: _Fold, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
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
    fit = _Fold(fit.n, fit.sx, fit.sy[cols], fit.xx, fit.xy[:, cols], fit.yy[cols])
    val = _Fold(val.n, val.sx, val.sy[cols], val.xx, val.xy[:, cols], val.yy[cols])
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
              total: _Fold | None = None) -> RidgeFit:
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


class PositionSums:
    """Per-position sums of the rows ``x`` and ``y`` and row counts, per fold (float64).

    The rows of one update are whole images in :func:`benchmarks.probe.readout.shortcut` order (image-major,
    then the ``positions`` grid positions), so row ``i`` is at position ``i % positions``. With
    :class:`RidgeStats` they are all a per-position centred ridge fit needs (:func:`within_positions`).
    ``x`` and ``y`` may be added in separate updates (the feature sums are shared by several tasks).

    Args:
        positions: grid positions P per image.
        in_dim: feature channels C.
        out_dim: outputs O.
        folds: number of folds.
        shift: subtracted from every ``x`` row first (the shift of the matching :class:`RidgeStats`).
    """

    def __init__(self, positions: int, in_dim: int, out_dim: int, folds: int = 2,
                 shift: Tensor | None = None):
        self.positions, self.in_dim, self.out_dim = positions, in_dim, out_dim
        self.shift = None if shift is None else shift.double().reshape(1, in_dim)
        self.n = torch.zeros(folds, positions, dtype=torch.float64)
        self.sx = torch.zeros(folds, positions, in_dim, dtype=torch.float64)
        self.sy = torch.zeros(folds, positions, out_dim, dtype=torch.float64)

    def _per_position(self, rows: torch.Tensor, dim: int, what: str) -> torch.Tensor:
        if rows.dim() != 2 or rows.shape[1] != dim or rows.shape[0] % self.positions:
            raise ValueError(
                f"position sums: {what} rows {tuple(rows.shape)} are not whole images of "
                f"{self.positions} positions x {dim} values"
            )
        return rows.double().reshape(-1, self.positions, dim)

    def update(self, x: Tensor | None, y: Tensor | None, fold: int = 0, count: bool | None = None) -> None:
        """Add the rows ``x`` (R x C) and/or ``y`` (R x O) of whole images to ``fold``.

        The images are counted once per update when ``count`` (default: when ``y`` is given), so
        feature sums added apart from the targets (shared by several tasks) are not counted twice.
        """
        images = 0
        if x is not None:
            x = self._per_position(x, self.in_dim, "x")
            if self.shift is not None:
                x = x - self.shift.to(x)[None]
            self.sx[fold] += x.sum(0).cpu()
            images = x.shape[0]
        if y is not None:
            y = self._per_position(y, self.out_dim, "y")
            self.sy[fold] += y.sum(0).cpu()
            images = y.shape[0]
        if count if count is not None else y is not None:
            self.n[fold] += images

    def merge(self, other: PositionSums) -> None:
        """Add another process's sums (same shape) into these."""
        self.n += other.n
        self.sx += other.sx
        self.sy += other.sy

    def means(self, folds: Iterable[int] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(counts P, x means P x C in shifted units, y means P x O) over ``folds`` (default: all)."""
        sel = list(range(self.n.shape[0])) if folds is None else list(folds)
        n = self.n[sel].sum(0)
        d = n.clamp_min(1)[:, None]
        return n, self.sx[sel].sum(0) / d, self.sy[sel].sum(0) / d


def _centred_gram(xx: Tensor, n_p: Tensor, sx_p: Tensor, mx_p: Tensor, own: bool) -> Tensor:
    """``x^T x`` about the per-position means ``mx_p``: ``xx - mx_p^T sx_p - a^T mx_p`` with
    ``a = sx_p - n_p mx_p`` (0 when the means are the rows' own: ``own``)."""
    out = xx - mx_p.T @ sx_p
    return out if own else out - (sx_p - n_p[:, None] * mx_p).T @ mx_p


def _about_positions(f: _Fold, n_p: Tensor, sx_p: Tensor, sy_p: Tensor, mx_p: Tensor, my_p: Tensor, own: bool,
                     xx: Tensor | None = None) -> _Fold:
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
    return _Fold(f.n, f.sx - nmx.sum(0), f.sy - nmy.sum(0), xx, xy,
                 f.yy - 2 * (my_p * sy_p).sum(0) + (nmy * my_p).sum(0))


_CENTRED_GRAMS: dict = {}  # (feature key, which sums, row counts) -> centred Gram; one stream at a time


def _shared_gram(key: tuple | None, f: _Fold, n_p: Tensor, sx_p: Tensor, mx_p: Tensor,
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


def within_positions(stats: RidgeStats, pos: PositionSums) -> tuple[RidgeStats, _Fold]:
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
            folds.append(_Fold())
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
