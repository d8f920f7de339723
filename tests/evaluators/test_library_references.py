"""Our own numerics against the standard libraries, as test-time references only.

- The evaluators' percentile bootstrap equals ``scipy.stats.bootstrap(method="percentile")`` given the
  same generator: both draw ``rng.integers(0, n, (resamples, n))`` and take NumPy's linear percentiles.
- The probe's closed-form ridge (``benchmarks/probe/readout/ridge.py``) equals scikit-learn's ``Ridge`` on
  standardised features (penalty ``alpha * n``), its held-out penalty choice equals a scikit-learn
  train/validation loop.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
import torch
from sklearn.linear_model import Ridge
from sklearn.metrics import mean_squared_error
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.probe.readout.ridge import fit_ridge
from benchmarks.probe.readout.ridge_sums import RidgeStats
from evaluators import build_evaluator

# ---------------------------------------------------------------------------------------- bootstrap


def _albedo_evaluator(n: int = 23):
    g = torch.Generator().manual_seed(7)
    ev = build_evaluator("albedo")
    for i in range(n):
        gt = torch.rand(1, 3, 12, 10, generator=g)
        pred = (gt + 0.2 * torch.randn(1, 3, 12, 10, generator=g) * (1 + i % 5)).clamp(0, 1)
        mask = torch.rand(1, 12, 10, generator=g) > 0.3
        ev.update(pred, gt, mask, index=[i])
    return ev


@pytest.mark.parametrize("seed", [0, 5])
def test_bootstrap_intervals_equal_scipy_percentile_bootstrap(seed):
    ev = _albedo_evaluator()
    _, rows = ev.sample_rows()
    abs_sum, sq_sum, pixels = rows["sum_abs"], rows["sum_sq"], rows["pixels"].astype(np.float64)
    full = ev.compute()
    # the per-image rows are the metric's sufficient statistics
    assert abs(abs_sum.sum() / pixels.sum() - full["mae"]) < 1e-12
    assert abs(np.sqrt(sq_sum.sum() / pixels.sum()) - full["rmse"]) < 1e-12
    ours = ev.bootstrap_intervals(["mae", "rmse"], resamples=999, level=0.9, seed=seed)
    statistics = {
        "mae": lambda a, p, axis=-1: a.sum(axis) / p.sum(axis),
        "rmse": lambda s, p, axis=-1: np.sqrt(s.sum(axis) / p.sum(axis)),
    }
    for key, data in (("mae", (abs_sum, pixels)), ("rmse", (sq_sum, pixels))):
        ref = scipy.stats.bootstrap(data, statistics[key], paired=True, vectorized=True, n_resamples=999,
                                    confidence_level=0.9, method="percentile",
                                    rng=np.random.default_rng(seed)).confidence_interval
        print(key, ours[key], (ref.low, ref.high))
        np.testing.assert_allclose(ours[key], (ref.low, ref.high), rtol=1e-12, atol=0)
    # a different seed gives a different interval (the comparison can fail)
    other = ev.bootstrap_intervals(["mae"], resamples=999, level=0.9, seed=seed + 1)["mae"]
    assert other != ours["mae"]


# -------------------------------------------------------------------------------------------- ridge


def _ridge_data(n=240, c=9, o=4, seed=0, noise=0.7):
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-1, 1.5, c, dtype=torch.float64)
    x = torch.randn(n, c, generator=g, dtype=torch.float64) * scale
    x = x + torch.linspace(-5, 5, c, dtype=torch.float64)  # means that centring must remove
    w = torch.randn(c, o, generator=g, dtype=torch.float64) / scale[:, None]
    y = x @ w + 1.5 + noise * torch.randn(n, o, generator=g, dtype=torch.float64)
    return x, y


def _stats(x, y, n_fit=None):
    stats = RidgeStats(x.shape[1], y.shape[1], folds=2)
    n_fit = len(x) if n_fit is None else n_fit
    stats.update(x[:n_fit], y[:n_fit], fold=0)
    if n_fit < len(x):
        stats.update(x[n_fit:], y[n_fit:], fold=1)
    return stats


def _sklearn_ridge(x, y, alpha_per_row):
    """Standardised (population std), centred features; scikit-learn's penalty is ours times n."""
    model = make_pipeline(StandardScaler(), Ridge(alpha=alpha_per_row * len(x), solver="cholesky"))
    return model.fit(x.numpy(), y.numpy())


@pytest.mark.parametrize("alpha", [1e-4, 1e-2, 1.0])
def test_ridge_equals_sklearn_ridge(alpha):
    x, y = _ridge_data()
    fit = fit_ridge(_stats(x, y), alphas=(alpha,))
    assert fit.alpha == alpha
    ref = _sklearn_ridge(x, y, alpha)
    xt, _ = _ridge_data(n=50, seed=1)
    got, want = fit(xt.float()).double().numpy(), ref.predict(xt.numpy())
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"alpha {alpha}: max relative prediction difference {err:.2e}")
    assert err < 1e-5  # our weights are returned in float32
    # and the penalty matters: a much larger one predicts differently
    other = _sklearn_ridge(x, y, 30.0).predict(xt.numpy())
    assert np.abs(other - want).max() / np.abs(want).max() > 1e-3


def test_ridge_penalty_choice_equals_a_sklearn_validation_loop():
    """fit_ridge: alpha chosen on fold 1 after fitting fold 0, then refit on all rows (scikit-learn loop)."""
    x, y = _ridge_data(n=120, c=40, o=3, seed=2, noise=3.0)  # few, noisy rows per feature: alpha matters
    n_fit = 60
    alphas = (1e-4, 1e-2, 1e-1, 1.0)
    fit = fit_ridge(_stats(x, y, n_fit), alphas=alphas)
    losses = {}
    for a in alphas:
        m = _sklearn_ridge(x[:n_fit], y[:n_fit], a)
        # ours: summed over outputs, per held-out row; scikit-learn: averaged over outputs
        losses[a] = y.shape[1] * mean_squared_error(y[n_fit:].numpy(), m.predict(x[n_fit:].numpy()))
        assert abs(fit.val_loss[a] - losses[a]) <= 1e-9 * losses[a], (a, fit.val_loss[a], losses[a])
    best = min(losses, key=losses.get)
    assert fit.alpha == best and best != min(alphas), losses
    ref = _sklearn_ridge(x, y, best)
    np.testing.assert_allclose(fit(x.float()).double().numpy(), ref.predict(x.numpy()), rtol=1e-4, atol=1e-4)


