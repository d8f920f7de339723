"""The streamed spine (data -> features -> sums -> solve -> test stream), checked against a naive
closed-form reference (``tests/_support/_naive_readout.py``: numpy ridge on the whole tiny split) and against
itself under other batchings, workers and product arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe import api  # noqa: E402
from benchmarks.probe.protocol import default_protocol  # noqa: E402
from benchmarks.probe.readout.shortcut import from_grid  # noqa: E402
from benchmarks.probe.tasks import build_task  # noqa: E402

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")


def _protocol(**changes):
    return default_protocol().replace(input_size=(64, 48), bootstrap_resamples=100, **changes)


def _split_rows(loader, group, tasks, stream, protocol):
    """Per task of ``group``: (features N x P x C, grid targets N x P x O, geometry) of the whole split."""
    from benchmarks.probe.readout.shortcut import ReadoutGeometry, _rows, to_grid

    xs, ys, geoms = [], {t: [] for t in group}, {}
    for batch in loader.batches(group, 0, 1):
        fs = stream(batch)
        b, c, h, w = fs.feats.shape
        xs.append(fs.feats.double().permute(0, 2, 3, 1).reshape(b, h * w, c))
        for t in group:
            g = geoms.setdefault(t, ReadoutGeometry.of(tasks[t], fs, protocol))
            lt = tasks[t].linear_targets(batch.targets[t])
            y = to_grid(lt, g.grid, g.r, g.out_size, g.valid_frac)
            ys[t].append(_rows(y.double()).reshape(b, h * w, -1))
    return torch.cat(xs).numpy(), {t: torch.cat(v).numpy() for t, v in ys.items()}, geoms


def test_streamed_read_out_equals_a_naive_closed_form_reference():
    """Every task's penalty, weights and test maps against numpy ridge on the whole split (noisy
    ground-truth features: a penalty inside the grid; 11 train images: batches of 8 + 3, both folds)."""
    from _naive_readout import naive_predict, naive_readout, naive_shrink

    from benchmarks.analysis.noisy_oracle import GroundTruthStream
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.readout.stream import fit_group, scene_groups

    protocol = _protocol(decoder_stage_stride=2)
    data = make_toy_data(n_train=11, n_test=3, size=(64, 48), tasks=["seg", "normal", "albedo"])
    tasks = {t: build_task(t, protocol) for t in ("seg", "normal", "albedo")}
    train, test = (SceneLoader(data, tasks, s, protocol) for s in ("train", "test"))
    stream = GroundTruthStream(tasks, protocol, sigma=1.0)
    inside = []  # the masked tasks' factors strictly inside (0, 1): not clipped
    for group, test_group in scene_groups(train, test):
        fits, _ = fit_group(train, group, tasks, stream, protocol)
        x, ys, geoms = _split_rows(train, group, tasks, stream, protocol)
        xt, _, _ = _split_rows(test, test_group, tasks, stream, protocol)
        for t in group:
            alpha, w, intercept = naive_readout(x, ys[t], protocol.ridge_holdout_every, protocol.ridge_alphas)
            fit = fits[t]
            assert fit.fit.alpha == alpha, t
            assert 0 < alpha < float("inf"), (t, alpha)  # the features are neither perfect nor useless
            np.testing.assert_allclose(fit.fit.weight.numpy(), w, rtol=1e-3, atol=1e-5 * np.abs(w).max())
            k = tasks[t].out_channels if tasks[t].masked else 0
            shrink = naive_shrink(x, ys[t], protocol.ridge_holdout_every, alpha, k) if k else None
            if k:  # the held-out factors, as streamed
                inside += [float(v) for v in shrink if 0 < v < 1]
                np.testing.assert_allclose(fit.shrink.numpy(), shrink, rtol=1e-6, atol=1e-9)
            want = naive_predict(xt, w, intercept, ys[t], k, shrink)
            g = geoms[t]
            n, p, c = xt.shape
            feats = torch.from_numpy(xt).float().reshape(n, g.grid[0], g.grid[1], c).permute(0, 3, 1, 2)
            got = fit.maps(feats, g.out_size, g.valid_frac)
            want_maps = from_grid(torch.from_numpy(want).float().reshape(n, g.grid[0], g.grid[1], -1)
                                  .permute(0, 3, 1, 2), g.r, g.out_size, g.valid_frac)
            torch.testing.assert_close(got, want_maps, rtol=1e-4, atol=1e-4 * float(want_maps.abs().max()))
    assert inside, "every masked factor was clipped: the comparison did not reach the ratio"


@pytest.mark.slow
def test_loader_workers_give_the_same_records(tmp_path):
    protocol = _protocol()
    data = make_toy_data(n_train=9, n_test=4, size=(64, 48))
    recs = []
    for workers in (0, 2):
        paths = api.run_probe("pixels", "seg,normal,pose", data, tmp_path / f"w{workers}", protocol=protocol,
                              options=api.RunOptions(workers=workers))
        recs.append({Path(p).parent.name: json.loads(Path(p).read_text())["metrics"] for p in paths})
    assert recs[0] == recs[1]


def test_a_masked_fit_and_its_shift_do_not_depend_on_batch_composition(tmp_path):
    """The fit of 9 images equals whether the first batch is full or not (shift from another batch)."""
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.readout.feature_streams import ReferenceStream
    from benchmarks.probe.readout.stream import fit_group

    protocol = _protocol()
    data = make_toy_data(n_train=9, n_test=2, size=(64, 48))
    task = build_task("normal", protocol)
    fits = []
    for batch_size in (8, 3):
        loader = SceneLoader(data, {"normal": task}, "train", protocol, batch_size=batch_size)
        fit, _ = fit_group(loader, ("normal",), {"normal": task}, ReferenceStream("oracle", protocol),
                              protocol)
        fits.append(fit["normal"])
    assert fits[0].fit.alpha == fits[1].fit.alpha
    torch.testing.assert_close(fits[0].bias_map, fits[1].bias_map, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fits[0].prior, fits[1].prior, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(fits[0].fit.weight, fits[1].fit.weight, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fast_products_give_the_exact_arithmetic_records(tmp_path, monkeypatch):
    """The syrk Gram and the block-sparse ``x^T y`` (wide features only by default) against v5's
    product-then-add arithmetic, forced on for the pixels' narrow features: same penalties, same
    metrics and bounds to float64 rounding amplified by the solve."""
    from benchmarks.probe.readout import products, stream

    protocol = _protocol()
    data = make_toy_data(n_train=11, n_test=6, size=(64, 48))
    recs, used = {}, {}
    blocks = []
    real_nonzero = products._nonzero_rows

    def nonzero_rows(y, block, channels):
        out = real_nonzero(y, block, channels)
        blocks.append(out is not None)
        return out

    monkeypatch.setattr(products, "_nonzero_rows", nonzero_rows)
    real_start = stream._FeatureSums.start
    for name, min_channels in (("exact", 10**9), ("fast", 0)):
        monkeypatch.setattr(stream, "FAST_PRODUCTS_MIN_CHANNELS", min_channels)
        if name == "fast":  # blocks cost nothing: every target with an all-zero block takes that path
            monkeypatch.setattr(products, "_BLOCK_S", 0.0)
            monkeypatch.setattr(products, "_BLOCK_MAC_S", 0.0)
        seen = []

        def start(fs, product_dtype, device="cpu", exact=False, seen=seen):
            seen.append(exact)
            return real_start(fs, product_dtype, device, exact)

        monkeypatch.setattr(stream._FeatureSums, "start", start)
        paths = api.run_probe("pixels", ",".join(TASKS), data, tmp_path / name, protocol=protocol)
        recs[name] = {json.loads(Path(p).read_text())["task"]: json.loads(Path(p).read_text()) for p in paths}
        used[name] = set(seen)
    assert used == {"exact": {True}, "fast": {False}}
    assert any(blocks), "no target took the block-sparse products"
    _assert_same_records(recs["fast"], recs["exact"], rel=1e-7, abs_=1e-9)


def _assert_same_records(got: dict, ref: dict, rel: float, abs_: float) -> None:
    """Per task: the same penalty, metrics and interval bounds within the tolerance."""
    for t in TASKS:
        a, b = got[t], ref[t]
        assert a["config"]["shortcut"]["alpha"] == b["config"]["shortcut"]["alpha"], t
        for k, v in b["metrics"].items():
            assert a["metrics"][k] == (None if v is None else pytest.approx(v, rel=rel, abs=abs_)), (t, k)
        for k, (lo, hi) in b["intervals"]["bounds"].items():
            assert a["intervals"]["bounds"][k] == pytest.approx([lo, hi], rel=rel, abs=abs_), (t, k)


@pytest.mark.slow
def test_float32_products_on_the_fast_path_match_the_float64_records(tmp_path, monkeypatch):
    """``ridge_product_dtype: "float32"`` on the fast path (the Gram through ``ssyrk``, float32 block
    products, float64 sums) against the float64 exact records: the same penalties, metrics and bounds
    within 1e-4 relative (float32 rounding of products about the shift, amplified by the solve)."""
    from scipy.linalg import blas

    from benchmarks.probe.readout import stream

    data = make_toy_data(n_train=11, n_test=6, size=(64, 48))
    ref = api.run_probe("pixels", ",".join(TASKS), data, tmp_path / "f64", protocol=_protocol())
    calls = []
    real = blas.ssyrk
    monkeypatch.setattr(blas, "ssyrk", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(stream, "FAST_PRODUCTS_MIN_CHANNELS", 0)
    got = api.run_probe("pixels", ",".join(TASKS), data, tmp_path / "f32",
                        protocol=_protocol(ridge_product_dtype="float32"))
    assert calls, "the float32 Gram did not go through ssyrk"
    recs = {}
    for name, paths in (("f64", ref), ("f32", got)):
        recs[name] = {json.loads(Path(p).read_text())["task"]: json.loads(Path(p).read_text()) for p in paths}
    _assert_same_records(recs["f32"], recs["f64"], rel=1e-4, abs_=1e-6)
