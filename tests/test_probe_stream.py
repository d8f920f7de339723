"""The streamed spine (data -> features -> sums -> solve -> test stream) equals the in-memory read-out.

The in-memory path (:func:`benchmarks.probe.api._task_run`: whole splits stacked, the shortcut fitted
by :func:`~benchmarks.probe.shortcut.fit_shortcut`, scored by ``evaluate_decoder``) is v5's reference;
the streamed one folds every batch into the sums at once. They differ in summation order, the
channel shift (the first batch's mean instead of the split's) and batch composition only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe import api  # noqa: E402
from benchmarks.probe.protocol import default_protocol  # noqa: E402
from benchmarks.probe.runkey import run_identity  # noqa: E402
from benchmarks.probe.tasks import build_task  # noqa: E402

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")


def _protocol(**changes):
    return default_protocol().replace(input_size=(64, 48), bootstrap_resamples=100, **changes)


def _in_memory(backbone, data, protocol, tmp_path) -> dict:
    """Every task's metrics and intervals through the in-memory path, on the same data and protocol."""
    from benchmarks.probe.backbones import REFERENCE_BACKBONES, build_probe_backbone, resolve_backbone_cfg
    from benchmarks.probe.features import FeatureStore

    store, reference = None, backbone if backbone in REFERENCE_BACKBONES else None
    if reference is None:
        bb = build_probe_backbone(resolve_backbone_cfg(backbone), img_size=tuple(protocol.input_size))
        store = FeatureStore(bb, protocol.tapped_layers(bb.num_layers), protocol)
    ctx = api._Context(backbone, {"type": "x", "params": 0, "weights": "none"}, protocol, data, "cpu")
    out = {}
    for t in TASKS:
        task = build_task(t, protocol)
        split = tuple(api.load_task_split(data, task, s, protocol) for s in ("train", "test"))
        run = api._task_run(task, split, store, protocol, "cpu", reference)
        path = tmp_path / f"{t}.json"
        rec = api._train_eval_record(ctx, run, 0, path, run_identity("p", {}, {"spec": backbone}, t, 0))
        out[t] = rec
    return out


@pytest.mark.parametrize("backbone", ["pixels", "sapiens2_tiny", "gt-oracle", "floor"])
def test_streamed_records_equal_the_in_memory_read_out(backbone, tmp_path):
    protocol = _protocol()
    data = make_toy_data(n_train=11, n_test=6, size=(64, 48))  # 11: batches of 8 + 3, both folds mixed
    paths = api.run_probe(backbone, ",".join(TASKS), data, tmp_path / "stream", protocol=protocol)
    streamed = {json.loads(Path(p).read_text())["task"]: json.loads(Path(p).read_text()) for p in paths}
    reference = _in_memory(backbone, data, protocol, tmp_path)
    # the oracle's errors are rounding (normals from its pointmap ~0.005 deg, albedo PSNR 144 dB)
    tol = {"rel": 1e-3, "abs": 1e-3} if backbone == "gt-oracle" else {"rel": 1e-5, "abs": 1e-6}
    for t in TASKS:
        a, b = streamed[t], reference[t]
        assert a["dataset"]["num_samples"] == b["dataset"]["num_samples"] == 6
        assert a["config"]["shortcut"]["alpha"] == b["config"]["shortcut"]["alpha"], t
        for k, v in b["metrics"].items():
            if v is None:
                assert a["metrics"][k] is None, (t, k)
            else:
                assert a["metrics"][k] == pytest.approx(v, **tol), (backbone, t, k)
        for k, (lo, hi) in b["intervals"]["bounds"].items():
            assert a["intervals"]["bounds"][k] == pytest.approx([lo, hi], **tol), (t, k)
        assert a["intervals"]["images_sha256"] == b["intervals"]["images_sha256"]


def test_loader_workers_give_the_same_records(tmp_path):
    protocol = _protocol()
    data = make_toy_data(n_train=9, n_test=4, size=(64, 48))
    recs = []
    for workers in (0, 2):
        paths = api.run_probe("pixels", "seg,normal,pose", data, tmp_path / f"w{workers}", protocol=protocol,
                              workers=workers)
        recs.append({Path(p).parent.name: json.loads(Path(p).read_text())["metrics"] for p in paths})
    assert recs[0] == recs[1]


def test_a_masked_prior_pass_and_shift_do_not_depend_on_batch_composition(tmp_path):
    """The fit of 9 images equals whether the first batch is full or not (shift from another batch)."""
    from benchmarks.probe.loader import SceneLoader
    from benchmarks.probe.stream import ReferenceStream, fit_group

    protocol = _protocol()
    data = make_toy_data(n_train=9, n_test=2, size=(64, 48))
    task = build_task("normal", protocol)
    fits = []
    for batch_size in (8, 3):
        loader = SceneLoader(data, {"normal": task}, "train", protocol, batch_size=batch_size)
        fit, _, _ = fit_group(loader, ("normal",), {"normal": task}, ReferenceStream("oracle", protocol),
                              protocol)
        fits.append(fit["normal"])
    assert fits[0].fit.alpha == fits[1].fit.alpha
    torch.testing.assert_close(fits[0].bias_map, fits[1].bias_map, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fits[0].fit.weight, fits[1].fit.weight, rtol=1e-4, atol=1e-5)


def test_fast_products_give_the_exact_arithmetic_records(tmp_path, monkeypatch):
    """The syrk Gram and the block-sparse ``x^T y`` (wide features only by default) against v5's
    product-then-add arithmetic, forced on for the pixels' narrow features: same penalties, same
    metrics and bounds to float64 rounding amplified by the solve."""
    from benchmarks.probe import products, stream

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


def test_float32_products_on_the_fast_path_match_the_float64_records(tmp_path, monkeypatch):
    """``ridge_product_dtype: "float32"`` on the fast path (the Gram through ``ssyrk``, float32 block
    products, float64 sums) against the float64 exact records: the same penalties, metrics and bounds
    within 1e-4 relative (float32 rounding of products about the shift, amplified by the solve)."""
    from scipy.linalg import blas

    from benchmarks.probe import stream

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
