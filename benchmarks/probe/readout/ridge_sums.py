"""The streamed sufficient statistics of the probe's ridge read-out: row sums per fold and per position.

:class:`RidgeStats` keeps, per fold, the sums of ``x``, ``y``, ``x x^T``, ``x y^T`` and ``y^2`` (float64)
that the closed-form solve (:mod:`benchmarks.probe.readout.ridge`) needs; :class:`PositionSums` the
per-position sums of ``x`` and ``y`` that a fit centred per position adds
(:func:`~benchmarks.probe.readout.ridge.within_positions`). Neither holds a row after its update.

Example:
    >>> import torch
    >>> stats = RidgeStats(3, 1)
    >>> stats.update(torch.ones(4, 3), torch.zeros(4, 1), fold=0)
    >>> stats.total().n, stats.folds[0].xx.tolist()[0]
    (4, [4.0, 4.0, 4.0])
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from benchmarks.probe.readout.products import add_cross


@dataclass
class FoldSums:
    """The sums of one fold's rows: count ``n``, ``x``, ``y``, ``x x^T``, ``x y^T`` and ``y^2`` (None
    before its first row)."""

    n: int = 0
    sx: torch.Tensor | None = None
    sy: torch.Tensor | None = None
    xx: torch.Tensor | None = None
    xy: torch.Tensor | None = None
    yy: torch.Tensor | None = None

    def add(self, other: FoldSums) -> FoldSums:
        if other.n == 0:
            return self
        if self.n == 0:
            return FoldSums(other.n, other.sx, other.sy, other.xx, other.xy, other.yy)
        return FoldSums(
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
        self.folds = [FoldSums() for _ in range(folds)]

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

    def total(self, folds: Collection[int] | None = None) -> FoldSums:
        out = FoldSums()
        for i, f in enumerate(self.folds):
            if folds is None or i in folds:
                out = out.add(f)
        return out



class PositionSums:
    """Per-position sums of the rows ``x`` and ``y`` and row counts, per fold (float64).

    The rows of one update are whole images in :func:`benchmarks.probe.readout.shortcut` order (image-major,
    then the ``positions`` grid positions), so row ``i`` is at position ``i % positions``. With
    :class:`RidgeStats` they are all a per-position centred ridge fit needs
    (:func:`~benchmarks.probe.readout.ridge.within_positions`).
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
