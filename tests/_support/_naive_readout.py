"""A naive closed-form reference of the probe's linear read-out, in numpy, on whole (tiny) splits.

Written from the read-out's definition (:mod:`benchmarks.probe.readout.shortcut`), not from its streamed sums:
at feature position ``p`` the read-out is ``my_p + (x - mx_p) W`` with ``W`` shared by the positions,
fitted by ridge on the features centred on their per-position train means and standardised per
channel (penalty ``alpha * rows``). The penalty is the grid value (or infinity) of least held-out
squared error, fold 0 fitted on its own per-position means and fold 1 scored about fold 0's; near-ties
within ``1e-9`` of the held-out variance go to the smaller penalty; then ``W`` is refitted on every
train row. A masked task's columns are ``[mask * t, mask]`` and its prediction
``A + mu_p (1 - B)`` with ``mu_p`` the per-pixel ratio of their train sums, shrunk toward ``mu_p`` by a
factor per channel: ``mu_p + s_c (A + mu_p (1 - B) - mu_p)``, ``s_c`` the least-squares factor of fold 0's
correction ``g`` against ``t - mu_p`` over the held-out rows' mask pixels that a fold-0 mask covers,
clipped to [0, 1] (0 at the infinite penalty).
"""

from __future__ import annotations

import math

import numpy as np


def _scales(centred: np.ndarray) -> np.ndarray:
    sd = np.sqrt((centred**2).sum(0) / len(centred))
    floor = 1e-3 * np.median(sd[sd > 0]) if (sd > 0).any() else 1.0
    return np.where(sd < floor, 1.0, sd)


def _ridge(x: np.ndarray, y: np.ndarray, mx: np.ndarray, my: np.ndarray, alpha: float) -> np.ndarray:
    """C x O weights of ``y - my`` on ``x - mx`` (N x P x C / N x P x O, means P x C / P x O)."""
    xc = (x - mx).reshape(-1, x.shape[-1])
    if math.isinf(alpha):
        return np.zeros((x.shape[-1], y.shape[-1]))
    yc = (y - my).reshape(-1, y.shape[-1])
    sd = _scales(xc)
    z = xc / sd
    w = np.linalg.solve(z.T @ z + alpha * len(z) * np.eye(z.shape[1]), z.T @ yc)
    return w / sd[:, None]


def naive_readout(x: np.ndarray, y: np.ndarray, holdout_every: int, alphas, max_outputs: int = 1536):
    """(penalty, W C x O, intercept P x O) of train features ``x`` N x P x C and targets ``y`` N x P x O."""
    n = len(x)
    val = np.arange(n) % holdout_every == holdout_every - 1
    cols = np.arange(0, y.shape[-1], max(1, -(-y.shape[-1] // max_outputs)))
    xf, yf, xv, yv = x[~val], y[~val][..., cols], x[val], y[val][..., cols]
    mx0, my0 = xf.mean(0), yf.mean(0)
    resid_v = yv - my0
    rows_v = resid_v.shape[0] * resid_v.shape[1]
    flat = resid_v.reshape(rows_v, -1)
    var = ((flat - flat.mean(0)) ** 2).sum() / rows_v
    curve = {}
    for a in sorted({float(a) for a in alphas} | {math.inf}):
        pred = (xv - mx0) @ _ridge(xf, yf, mx0, my0, a) + my0
        curve[a] = ((pred - yv) ** 2).sum() / rows_v
    best = min(curve.values())
    alpha = min(a for a, v in curve.items() if v <= best + 1e-9 * abs(var) + 1e-300)
    mx, my = x.mean(0), y.mean(0)
    w = _ridge(x, y, mx, my, alpha)
    return alpha, w, my - mx @ w


def _prior(y: np.ndarray, k: int) -> np.ndarray:
    """P x k * rr ratio of the sums of ``A`` and ``B`` over the rows of ``y`` (0 where no mask is)."""
    rr = y.shape[-1] // (k + 1)
    s = y.sum(0)
    st, sm = s[:, : k * rr], np.tile(s[:, k * rr :], k)
    return np.where(sm > 0, st / np.maximum(sm, 1e-12), 0.0)


def _compose(z: np.ndarray, mu: np.ndarray, k: int) -> np.ndarray:
    rr = z.shape[-1] // (k + 1)
    return z[..., : k * rr] + mu * (1 - np.tile(z[..., k * rr :], k))


def naive_shrink(x: np.ndarray, y: np.ndarray, holdout_every: int, alpha: float, k: int) -> np.ndarray:
    """The k factors of a masked task's read-out at penalty ``alpha`` (train ``x``, ``y`` as
    :func:`naive_readout`; ``y``'s columns ``[A, B]``)."""
    if math.isinf(alpha):
        return np.zeros(k)
    val = np.arange(len(x)) % holdout_every == holdout_every - 1
    xf, yf, xv, yv = x[~val], y[~val], x[val], y[val]
    mx0, my0, mu0 = xf.mean(0), yf.mean(0), _prior(yf, k)
    g = _compose((xv - mx0) @ _ridge(xf, yf, mx0, my0, alpha) + my0, mu0, k) - mu0
    rr = y.shape[-1] // (k + 1)
    covered = np.tile(yf.sum(0)[:, k * rr :] > 0, k)
    a, b = yv[..., : k * rr], np.tile(yv[..., k * rr :], k)
    dg = ((a - b * mu0) * g * covered).reshape(-1, k, rr).sum((0, 2))
    gg = (b * g**2 * covered).reshape(-1, k, rr).sum((0, 2))
    s = np.where(gg > 0, dg / np.where(gg > 0, gg, 1.0), 0.0)
    return np.clip(s, 0.0, 1.0)


def naive_predict(x: np.ndarray, w: np.ndarray, intercept: np.ndarray, y_train: np.ndarray,
                  masked_channels: int = 0, shrink: np.ndarray | None = None) -> np.ndarray:
    """N x P x O' predictions on features ``x``; a masked task's (``masked_channels`` k > 0) combine
    ``A + mu (1 - B)``, ``mu`` from the train targets ``y_train`` (O = (k + 1) * rr, O' = k * rr), and
    with ``shrink`` (k factors) are ``mu + s_c (A + mu (1 - B) - mu)``."""
    z = x @ w + intercept
    if not masked_channels:
        return z
    mu = _prior(y_train, masked_channels)
    t_hat = _compose(z, mu, masked_channels)
    if shrink is None:
        return t_hat
    return mu + np.repeat(shrink, t_hat.shape[-1] // masked_channels) * (t_hat - mu)
