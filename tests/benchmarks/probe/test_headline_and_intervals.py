"""Protocol v4: the linear probe as the headline, intervals in every record, the main job's backbones,
float32 ridge products, the bf16 backbone pass."""

from __future__ import annotations

import math

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.protocol import (  # noqa: E402
    PROTOCOL_VERSION,
    body_protocol,
    default_protocol,
    quick_protocol,
)
from benchmarks.probe.tasks import probe_task_names  # noqa: E402

TASKS = probe_task_names()


def test_v4_headline_is_the_linear_probe_and_the_body_has_its_own_id():
    p, body = default_protocol(), body_protocol()
    assert PROTOCOL_VERSION == 5 and all(i.startswith("probe-v5-") for i in p.protocol_ids().values())
    assert {t: s.decoder for t, s in p.tasks.items()} == {t: "linear" for t in TASKS}
    assert {t: s.decoder for t, s in body.tasks.items()} == {t: "pixelshuffle" for t in TASKS}
    assert not set(body.protocol_ids().values()) & set(p.protocol_ids().values())
    # everything else is the same protocol
    assert body.replace(tasks={t: {"decoder": "linear"} for t in TASKS}) == p
    assert (p.backbone_dtype, p.ridge_product_dtype) == ("bfloat16", "float64")
    assert (p.interval_level, p.bootstrap_resamples, p.bootstrap_seed) == (0.95, 1000, 0)


@pytest.mark.parametrize(
    "change",
    [
        {"backbone_dtype": "float32"},
        {"ridge_product_dtype": "float32"},
        {"interval_level": 0.9},
        {"bootstrap_resamples": 500},
        {"bootstrap_seed": 1},
    ],
)
def test_new_knobs_change_the_id(change):
    new, old = default_protocol().replace(**change).protocol_ids(), default_protocol().protocol_ids()
    assert all(new[t] != old[t] for t in old)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"backbone_dtype": "int8"}, "backbone_dtype"),
        ({"ridge_product_dtype": "bfloat16"}, "ridge_product_dtype"),
        ({"interval_level": 1.0}, "interval_level"),
        ({"bootstrap_resamples": 0}, "bootstrap_resamples"),
    ],
)
def test_bad_new_knobs_are_errors(change, message):
    with pytest.raises(ValueError, match=message):
        default_protocol().replace(**change)


def _check_intervals(rec: dict, protocol) -> None:
    from benchmarks.probe.records.headline import PROBE_HEADLINE

    iv = rec["intervals"]
    assert iv["level"] == protocol.interval_level and iv["n"] == rec["dataset"]["num_samples"]
    assert iv["method"] in ("bootstrap", "seeds")
    if iv["method"] == "bootstrap":
        assert (iv["resamples"], iv["seed"]) == (protocol.bootstrap_resamples, protocol.bootstrap_seed)
    key = PROBE_HEADLINE[rec["task"]].key
    assert key in iv["bounds"], (rec["task"], sorted(iv["bounds"]))
    for name, (low, high) in iv["bounds"].items():
        assert math.isfinite(low) and math.isfinite(high) and low <= high, (name, low, high)
        value = rec["metrics"][name]
        # a percentile interval of a mean-like metric holds the point estimate (tiny slack: floats)
        if name in ("EPE", "mIoU", "normal_mae", "l2_mean", "mae"):
            assert low - 1e-9 <= value <= high + 1e-9, (rec["task"], name, low, value, high)


@pytest.mark.slow
def test_every_probe_record_has_sane_intervals(tmp_path):
    from benchmarks.probe.api import run_probe
    from sapiens2.records.results import read_record

    protocol = quick_protocol().replace(tasks={t: {"decoder": "linear"} for t in TASKS})
    data = make_toy_data()
    paths = run_probe("pixels", TASKS, data, tmp_path, protocol=protocol)
    assert len(paths) == len(TASKS)
    for p in paths:
        rec = read_record(p)
        _check_intervals(rec, protocol)
        assert rec["intervals"]["method"] == "bootstrap" and rec["intervals"]["n"] == 4
    # same seed, same data: the bootstrap is reproducible
    again = run_probe("pixels", ["seg"], data, tmp_path / "again", protocol=protocol)
    assert read_record(again[0])["intervals"] == read_record(paths[1])["intervals"]


@pytest.mark.slow
def test_mean_over_seeds_takes_the_seed_interval_when_seeds_differ(tmp_path):
    from benchmarks.probe.api import run_probe
    from sapiens2.records.results import read_record

    data = make_toy_data(tasks=("normal",))
    protocol = quick_protocol()  # the trained body: seeds differ
    paths = run_probe("pixels", ["normal"], data, tmp_path, seeds=(0, 1), protocol=protocol)
    seeds, mean = [read_record(p) for p in paths[:2]], read_record(paths[2])
    for rec in seeds:
        _check_intervals(rec, protocol)
    vals = [r["metrics"]["normal_mae"] for r in seeds]
    assert vals[0] != vals[1]
    assert mean["intervals"]["method"] == "seeds" and mean["intervals"]["n"] == 4
    low, high = mean["intervals"]["bounds"]["normal_mae"]
    half = 12.706 * abs(vals[0] - vals[1]) / math.sqrt(2) / math.sqrt(2)  # t(0.975, 1) s / sqrt(k)
    assert (low, high) == pytest.approx((sum(vals) / 2 - half, sum(vals) / 2 + half))
    # the linear probe trains nothing: its seeds agree, the mean keeps the bootstrap interval
    lin = quick_protocol().replace(tasks={"normal": {"decoder": "linear"}})
    paths = run_probe("pixels", ["normal"], data, tmp_path / "lin", seeds=(0, 1), protocol=lin)
    assert read_record(paths[2])["intervals"] == read_record(paths[0])["intervals"]


@pytest.mark.slow
def test_terminal_table_shows_value_interval_and_n(tmp_path, capsys):
    from benchmarks.cli.probe import _print_summary
    from benchmarks.probe.api import run_probe

    protocol = quick_protocol().replace(tasks={"seg": {"decoder": "linear"}, "pose": {"decoder": "linear"}})
    data = make_toy_data(tasks=("pose", "seg"))
    paths = run_probe("pixels", ["pose", "seg"], data, tmp_path, protocol=protocol)
    _print_summary(paths)
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("backbone"))
    header, row = lines[start : start + 2]
    assert "pose EPE px" in header and "seg mIoU %" in header
    assert row.startswith("pixels") and row.count("[") == 2  # each value with its interval
    assert "each cell: value [95% interval]" in lines and "n (test images): pose 4, seg 4" in lines


def test_main_job_probes_pretrained_beside_its_twin_and_the_references():
    from benchmarks.mainjob import DEFAULT_BACKBONES
    from benchmarks.probe.backbones import ORACLE, build_probe_backbone, resolve_backbone_cfg

    names = list(DEFAULT_BACKBONES)
    assert ORACLE in names and "pixels" in names
    pretrained = [n for n in names if f"{n}-random" in names]
    assert pretrained, f"no pretrained backbone with its '-random' twin in {names}"
    for name in pretrained:
        bb = build_probe_backbone(resolve_backbone_cfg(name), img_size=(256, 192))
        twin = build_probe_backbone(resolve_backbone_cfg(f"{name}-random"), img_size=(256, 192))
        assert bb.weights not in (None, "none") and "random" in str(twin.weights)
        a, b = bb.state_dict(), twin.state_dict()
        assert a.keys() == b.keys() and any(not torch.equal(a[k], b[k]) for k in a)
    assert "floor" in names  # the feature-free floor (protocol v5)
    assert any(resolve_backbone_cfg(n)["type"] == "HFViTProbe" for n in names if n not in (ORACLE, "floor"))
    from benchmarks.probe.backbones.presets import twin_pairs
    from sapiens2.weights import SHIPPED

    pairs = twin_pairs(names)
    shipped = [n for n in names if n in SHIPPED]
    assert len(shipped) >= 2 and sorted(a for a, _ in pairs) == sorted(shipped), pairs
    assert all(b.endswith("-random") and b in names for _, b in pairs)


def test_float32_products_keep_the_ridge_fit_of_float64():
    from benchmarks.probe.readout.ridge import fit_ridge
    from benchmarks.probe.readout.ridge_sums import RidgeStats

    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 40, generator=g) * 3 + 50  # a large mean: the shift must come first
    y = x @ torch.randn(40, 7, generator=g) + 0.1 * torch.randn(600, 7, generator=g)
    fits = {}
    for dtype in (torch.float64, torch.float32):
        stats = RidgeStats(40, 7, shift=x.double().mean(0), product_dtype=dtype)
        for s in range(0, 600, 100):
            stats.update(x[s : s + 100], y[s : s + 100], fold=int(s >= 450))
        fits[dtype] = fit_ridge(stats, alphas=(1e-6, 1e-3, 1.0))
    a, b = fits[torch.float64], fits[torch.float32]
    assert a.alpha == b.alpha
    torch.testing.assert_close(b.weight, a.weight, rtol=0, atol=1e-4 * float(a.weight.abs().max()))


def test_bf16_backbone_features_are_close_to_float32():
    from benchmarks.probe.backbones import build_probe_backbone, resolve_backbone_cfg
    from benchmarks.probe.features.store import FeatureStore

    bb = build_probe_backbone(resolve_backbone_cfg("sapiens2_tiny"), img_size=(64, 48))
    images = torch.rand(2, 3, 64, 48, generator=torch.Generator().manual_seed(0))
    p = quick_protocol().replace(feature_dtype="float32")
    f32 = FeatureStore(bb, [1, 3], p.replace(backbone_dtype="float32")).compute(images).feats
    f16 = FeatureStore(bb, [1, 3], p.replace(backbone_dtype="bfloat16")).compute(images).feats
    err = float((f16 - f32).norm() / f32.norm())
    assert 0 < err < 0.03, err  # bf16 differs, but little (measured on sapiens2_0.1b: 0.5%)
