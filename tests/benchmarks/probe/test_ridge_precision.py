"""The GPU-safe statistics path on the CPU: float32 products of mean-shifted features, accumulated in
float64 (``RidgeStats(product_dtype=torch.float32, shift=...)``), against the float64 reference.

Tolerance: the same penalty, predictions within 1e-5 of the reference (relative to the spread of the
predictions), held-out errors within 1e-4 relative. Features whose channel means dwarf their spread
(mean 40-50, spread ~1, strongly correlated channels) are the hard case: unshifted float32 products
fail it (about 1e-2 and a different penalty), which the last assertion checks so the test can fail.
"""

from __future__ import annotations

import torch

from benchmarks.probe.readout.ridge import fit_ridge
from benchmarks.probe.readout.ridge_sums import RidgeStats

ALPHAS = (1e-6, 1e-4, 1e-2, 1.0)


def _data(n=6000, c=96, o=24):
    g = torch.Generator().manual_seed(0)
    mean = 40 + 10 * torch.rand(c, generator=g)
    x = mean + torch.randn(n, c, generator=g) @ (torch.randn(c, c, generator=g) / c**0.5)
    y = (x - mean) @ torch.randn(c, o, generator=g) + 0.3 * torch.randn(n, o, generator=g)
    return x.float(), y.float()


def _fit(x, y, product_dtype, shift, batch=500):
    stats = RidgeStats(x.shape[1], y.shape[1], shift=shift, product_dtype=product_dtype)
    for i in range(0, len(x), batch):
        stats.update(x[i : i + batch], y[i : i + batch], fold=int(i % 2000 == 1500))
    return fit_ridge(stats, ALPHAS)


def _pred_err(fit, ref, x) -> float:
    p = x.double() @ fit.weight.double() + fit.bias.double()
    r = x.double() @ ref.weight.double() + ref.bias.double()
    return float((p - r).norm() / (r - r.mean(0)).norm())


def _curve_err(fit, ref) -> float:
    return max(abs(fit.val_loss[a] - v) / v for a, v in ref.val_loss.items())


def test_float32_products_of_shifted_features_match_the_float64_reference():
    x, y = _data()
    shift = x[:500].double().mean(0)  # the first batch's mean: what a one-pass GPU stream knows
    ref = _fit(x, y, torch.float64, shift)
    f32 = _fit(x, y, torch.float32, shift)
    assert f32.alpha == ref.alpha
    assert _pred_err(f32, ref, x) < 1e-5
    assert _curve_err(f32, ref) < 1e-4
    raw = _fit(x, y, torch.float32, None)
    assert _pred_err(raw, ref, x) > 1e-3 or raw.alpha != ref.alpha

