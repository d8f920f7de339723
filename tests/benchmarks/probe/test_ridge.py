"""The closed-form ridge shortcut: statistics, penalty choice and fit against brute-force references."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.probe.readout.ridge import fit_ridge, validation_curve
from benchmarks.probe.readout.ridge_sums import RidgeStats


def _data(n=300, c=12, o=5, seed=0, noise=0.5):
    g = torch.Generator().manual_seed(seed)
    # channels on very different scales, one constant: standardisation must handle both
    x = torch.randn(n, c, generator=g, dtype=torch.float64) * torch.logspace(-2, 2, c, dtype=torch.float64)
    x[:, 0] = 3.0
    w = (
        torch.randn(c, o, generator=g, dtype=torch.float64)
        / torch.logspace(-2, 2, c, dtype=torch.float64)[:, None]
    )
    y = x @ w + 2.0 + noise * torch.randn(n, o, generator=g, dtype=torch.float64)
    return x, y


def _reference_ridge(x, y, alpha):
    """Brute force: standardise with the std of the rows, centre, solve the normal equations."""
    mx, my = x.mean(0), y.mean(0)
    sd = x.std(0, unbiased=False)
    sd = torch.where(sd < 1e-3 * sd[sd > 0].median(), torch.ones_like(sd), sd)
    xs = (x - mx) / sd
    a = xs.T @ xs + alpha * x.shape[0] * torch.eye(x.shape[1], dtype=x.dtype)
    w = torch.linalg.solve(a, xs.T @ (y - my)) / sd[:, None]
    return w, my - mx @ w


def _stats(x, y, folds, batch=37, shift=True):
    stats = RidgeStats(x.shape[1], y.shape[1], shift=x.mean(0) if shift else None)
    for s in range(0, len(x), batch):
        for k in (0, 1):
            sel = torch.nonzero(folds[s : s + batch] == k).flatten() + s
            if len(sel):
                stats.update(x[sel], y[sel], fold=k)
    return stats


def test_streamed_fit_equals_the_direct_solve():
    x, y = _data()
    for alpha in (1e-6, 1e-2, 3.0):
        # every row in the fit fold: no held-out rows, so the (smallest) grid value is used
        fit = fit_ridge(_stats(x, y, torch.zeros(len(x), dtype=torch.long)), alphas=(alpha,))
        assert fit.alpha == alpha
        w, b = _reference_ridge(x, y, alpha)
        # the constant channel's weight is arbitrary (its centred column is 0): compare the others
        # and the predictions
        torch.testing.assert_close(
            fit.weight.double()[1:], w[1:], rtol=2e-4, atol=1e-6 * float(w.abs().max())
        )
        torch.testing.assert_close(fit(x.float()).double(), x @ w + b, rtol=1e-4, atol=1e-3)


def test_validation_curve_equals_the_explicit_held_out_error():
    x, y = _data(noise=2.0)
    folds = (torch.arange(len(x)) % 4 == 3).long()
    fit_rows, val_rows = x[folds == 0], x[folds == 1]
    alphas = (1e-4, 1e-1, 1.0, 30.0)
    curve, var = validation_curve(_stats(x, y, folds), alphas)
    for a in alphas:
        w, b = _reference_ridge(fit_rows, y[folds == 0], a)
        explicit = ((val_rows @ w + b - y[folds == 1]) ** 2).sum(1).mean()
        assert curve[a] == pytest.approx(float(explicit), rel=1e-7)
    yv = y[folds == 1]
    assert var == pytest.approx(float(((yv - yv.mean(0)) ** 2).sum(1).mean()), rel=1e-6)


def test_penalty_is_chosen_on_the_held_out_rows():
    folds_every = 4
    # many noisy outputs, few rows: a strong penalty must win; clean outputs: a weak one
    x, y = _data(n=60, c=40, noise=20.0, seed=1)
    folds = (torch.arange(len(x)) % folds_every == folds_every - 1).long()
    noisy = fit_ridge(_stats(x, y, folds), alphas=(1e-6, 1e-3, 1.0, 100.0))
    x, y = _data(n=400, c=10, noise=1e-3, seed=2)
    folds = (torch.arange(len(x)) % folds_every == folds_every - 1).long()
    clean = fit_ridge(_stats(x, y, folds), alphas=(1e-6, 1e-3, 1.0, 100.0))
    assert noisy.alpha >= 1.0 and clean.alpha <= 1e-3, (noisy.val_loss, clean.val_loss)
    assert clean.val_r2 > 0.999
    # the intercept alone is always a candidate and wins on pure noise
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(80, 30, generator=g), torch.randn(80, 2, generator=g)
    folds = (torch.arange(80) % 4 == 3).long()
    pure = fit_ridge(_stats(x, y, folds), alphas=(1e-6, 1e-3))
    assert math.isinf(pure.alpha) and torch.count_nonzero(pure.weight) == 0


def test_output_subsampled_curve_matches_those_outputs():
    x, y = _data(o=3000, c=8, n=200, seed=4)
    folds = (torch.arange(len(x)) % 4 == 3).long()
    full = _stats(x, y, folds)
    curve, _ = validation_curve(full, (1e-3, 1.0), max_outputs=1000)
    cols = torch.arange(0, 3000, 3)
    ref, _ = validation_curve(_stats(x, y[:, cols], folds), (1e-3, 1.0), max_outputs=10_000)
    for a in ref:
        assert curve[a] == pytest.approx(ref[a], rel=1e-9)


def test_grid_layout_round_trips_padded_outputs():
    from benchmarks.probe.readout.decoders import padded_size
    from benchmarks.probe.readout.shortcut import from_grid, to_grid

    g = torch.Generator().manual_seed(6)
    y = torch.randn(2, 3, 256, 192, generator=g)
    # patch 14 on 256 x 192: a 19 x 14 grid covering 266 x 196 pixels
    valid = (256 / 266, 192 / 196)
    assert padded_size((256, 192), valid) == (266, 196)
    z = to_grid(y, (19, 14), 14, (256, 192), valid)
    assert z.shape == (2, 3 * 14 * 14, 19, 14)
    torch.testing.assert_close(from_grid(z, 14, (256, 192), valid), y)


def test_holdout_fold_always_holds_one_image_out():
    from benchmarks.probe.readout.shortcut import holdout_fold

    assert holdout_fold(8, 4).tolist() == [0, 0, 0, 1, 0, 0, 0, 1]
    assert holdout_fold(3, 4).tolist() == [0, 0, 1]
    assert holdout_fold(1, 4).tolist() == [0]


def _blocky_targets(rows: int, blocks: int, width: int, density: float, seed: int) -> torch.Tensor:
    """Targets in ``blocks`` blocks of ``width`` columns, each block non-zero on a few rows only."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(rows, blocks * width, generator=g, dtype=torch.float64)
    keep = torch.rand(rows, blocks, generator=g) < density
    y = y * keep.repeat_interleave(width, dim=1)
    y[:, :width] = 0.0  # a block no row touches
    return y


@pytest.mark.parametrize("density", [0.02, 0.3, 0.9])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_block_sparse_cross_products_equal_the_dense_product(density, dtype, monkeypatch):
    from benchmarks.probe.readout import products
    from benchmarks.probe.readout.products import add_cross

    g = torch.Generator().manual_seed(1)
    x = torch.randn(97, 23, generator=g, dtype=torch.float64)
    y = _blocky_targets(97, 7, 5, density, seed=2)
    # at 23 channels the cost rule keeps the dense product; with free blocks the block path runs
    assert products._nonzero_rows(y, 5, 23) is None
    monkeypatch.setattr(products, "_BLOCK_S", 0.0)
    monkeypatch.setattr(products, "_BLOCK_MAC_S", 0.0)
    parts = products._nonzero_rows(y, 5, 23)
    assert parts is not None and 0 not in [j for j, _ in parts]  # the untouched block is skipped
    ref = x.T @ y
    for block in (0, 5, 3):  # 3 does not divide the 35 columns: the dense product
        acc = torch.full_like(ref, 2.0)
        add_cross(acc, x.to(dtype), y.to(dtype), block)
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        torch.testing.assert_close(acc - 2.0, ref, rtol=tol, atol=tol * float(ref.abs().max()))
        assert acc.dtype == torch.float64


def test_block_updates_give_the_same_statistics_and_fit(monkeypatch):
    from benchmarks.probe.readout import products

    # blocks cost nothing: the block path is taken although 10 channels would not pay for it
    monkeypatch.setattr(products, "_BLOCK_S", 0.0)
    monkeypatch.setattr(products, "_BLOCK_MAC_S", 0.0)
    assert products._nonzero_rows(_blocky_targets(40, 6, 4, 0.1, seed=3), 4, 10) is not None
    x, _ = _data(n=240, c=10)
    y = _blocky_targets(240, 6, 4, 0.1, seed=3)
    folds = torch.arange(240) % 5 == 0
    dense, sparse = RidgeStats(10, 24, shift=x.mean(0)), RidgeStats(10, 24, shift=x.mean(0))
    for s in range(0, 240, 40):
        for k in (0, 1):
            sel = torch.nonzero(folds[s : s + 40].long() == k).flatten() + s
            dense.update(x[sel], y[sel], fold=k)
            sparse.update(x[sel], y[sel], fold=k, block=4, exact=False)
    for a, b in zip(dense.folds, sparse.folds):
        assert a.n == b.n
        for name in ("sx", "sy", "xx", "xy", "yy"):
            torch.testing.assert_close(getattr(b, name), getattr(a, name), rtol=1e-12, atol=1e-12)
    fa, fb = fit_ridge(dense), fit_ridge(sparse)
    assert fa.alpha == fb.alpha
    torch.testing.assert_close(fb.weight, fa.weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gram_through_blas_syrk_equals_the_full_product(dtype, monkeypatch):
    from benchmarks.probe.readout import products
    from benchmarks.probe.readout.products import add_gram, symmetrize_

    name = "dsyrk" if dtype == torch.float64 else "ssyrk"
    calls = []
    real = getattr(products.blas, name)
    monkeypatch.setattr(products.blas, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    g = torch.Generator().manual_seed(4)
    x = torch.randn(61, 17, generator=g, dtype=torch.float64)
    ref = x.T @ x
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    # over several batches the lower triangle accumulates onto what was there; symmetrize_ completes it
    acc = torch.eye(17, dtype=torch.float64)
    for part in x.to(dtype).split(20):
        add_gram(acc, part)
    acc -= torch.eye(17, dtype=torch.float64)
    torch.testing.assert_close(acc.tril(), ref.tril(), rtol=tol, atol=tol * 61)
    torch.testing.assert_close(symmetrize_(acc), ref, rtol=tol, atol=tol * 61)
    assert torch.equal(acc, acc.T)
    assert len(calls) == 4, f"{name} took {len(calls)} of the 4 batches"
