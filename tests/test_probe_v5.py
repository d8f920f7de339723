"""Protocol v5: the read-out nests the feature-free floor, the floor row, the noisy-oracle ladder."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.protocol import PROTOCOL_VERSION, default_protocol, quick_protocol  # noqa: E402
from benchmarks.probe.tasks import probe_task_names  # noqa: E402

TASKS = probe_task_names()

LINEAR = {t: {"decoder": "linear"} for t in TASKS}


def _protocol(**changes):
    return quick_protocol().replace(tasks=LINEAR, **changes)


def test_v5_protocol_id():
    ids = default_protocol().protocol_ids()
    assert PROTOCOL_VERSION == 5 and set(ids) == set(TASKS)
    assert all(i.startswith("probe-v5-") for i in ids.values())


def test_within_position_statistics_match_an_explicit_fit_and_merge():
    """The per-position centred ridge from streamed sums equals ridge on explicitly centred rows, and
    two halves merged equal the whole (the DDP contract)."""
    from benchmarks.probe.ridge import PositionSums, RidgeStats, fit_ridge, within_positions

    g = torch.Generator().manual_seed(0)
    n_img, pos, c, o = 40, 6, 5, 3
    x = torch.randn(n_img, pos, c, generator=g) + torch.randn(1, pos, c, generator=g) * 3  # positional means
    y = x @ torch.randn(c, o, generator=g) + torch.randn(1, pos, o, generator=g) * 5
    y = y + 0.1 * torch.randn(n_img, pos, o, generator=g)
    stats, sums = RidgeStats(c, o), PositionSums(pos, c, o)
    halves = [PositionSums(pos, c, o), PositionSums(pos, c, o)]
    for i in range(n_img):
        fold = int(i % 4 == 3)
        stats.update(x[i], y[i], fold=fold)
        sums.update(x[i], y[i], fold=fold)
        halves[i % 2].update(x[i], y[i], fold=fold)
    halves[0].merge(halves[1])
    for a, b in ((halves[0].n, sums.n), (halves[0].sx, sums.sx), (halves[0].sy, sums.sy)):
        torch.testing.assert_close(a, b)
    within, total = within_positions(stats, sums)
    fit = fit_ridge(within, alphas=(1e-3,), total=total)
    # explicit: centre every row on its position's all-image mean, solve the standardised ridge
    xc, yc = (x - x.mean(0)).reshape(-1, c).double(), (y - y.mean(0)).reshape(-1, o).double()
    sd = xc.square().mean(0).sqrt()
    w = torch.linalg.solve((xc / sd).T @ (xc / sd) + fit.alpha * len(xc) * torch.eye(c, dtype=torch.float64),
                           (xc / sd).T @ yc) / sd[:, None]
    torch.testing.assert_close(fit.weight.double(), w, atol=1e-5, rtol=1e-4)
    inf = fit_ridge(within, alphas=(), total=total)
    assert math.isinf(inf.alpha) and not bool(inf.weight.abs().max() > 0)


def _split(name, protocol, n_train=12, n_test=6):
    from benchmarks.probe.data import sample_indices
    from benchmarks.probe.tasks import build_task

    data = make_toy_data(n_train=n_train, n_test=n_test)
    task = build_task(name, protocol)
    train, test = (data.load(name, s, protocol) for s in ("train", "test"))
    return task, task.targets(train), task.targets(test), sample_indices(test)


def _random_features(n, protocol, seed):
    from benchmarks.probe.features import FeatureSet

    h, w = protocol.input_size
    g = torch.Generator().manual_seed(seed)
    return FeatureSet(torch.randn(n, 8, h // 16, w // 16, generator=g), None, 16, (1.0, 1.0), (h, w))


def _maps(shortcut, task, feats, protocol):
    stride = min(protocol.task(task.name).output_stride, feats.patch_size)
    x, _ = feats.batch(torch.arange(feats.feats.shape[0]), protocol.cls_concat)
    return shortcut.maps(x, task.output_size(feats.image_size, stride), feats.valid_frac)


def _same(a, b) -> bool:
    """Equal metric trees, NaN equal to NaN (a class absent from the test images)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _metrics(task, maps, tgt, idx):
    ev = task.make_evaluator()
    task.update_evaluator(ev, maps, None, tgt, idx)
    return ev.compute()


@pytest.mark.parametrize("name", TASKS)
def test_readout_at_infinite_penalty_equals_the_floor(name):
    """At the infinite penalty the read-out of any features is the floor's prediction, bit for bit
    (another grid, another shuffle factor), and so are the evaluator's metrics; the floor is the
    per-pixel train prior (seg: the most frequent train class of each pixel)."""
    from benchmarks.probe.api import _floor_features
    from benchmarks.probe.shortcut import fit_shortcut

    protocol = _protocol()
    task, train, test, idx = _split(name, protocol)
    feats_tr, feats_te = _random_features(12, protocol, 0), _random_features(6, protocol, 1)
    inf = fit_shortcut(task, feats_tr, train, protocol, alphas=())
    assert math.isinf(inf.fit.alpha) and not bool(inf.fit.weight.abs().max() > 0)
    floor_tr, floor_te = _floor_features(task, train, protocol), _floor_features(task, test, protocol)
    floor = fit_shortcut(task, floor_tr, train, protocol)
    assert math.isinf(floor.fit.alpha), "constant features: the floor's penalty is the infinite one"
    assert floor.r != inf.r
    a, b = _maps(inf, task, feats_te, protocol), _maps(floor, task, floor_te, protocol)
    assert torch.equal(a, b)
    assert _same(_metrics(task, a, test, idx), _metrics(task, b, test, idx))
    if name == "seg":  # the floor's argmax is each pixel's most frequent train class
        counts = torch.nn.functional.one_hot(train["label"].clamp_max(28), 29).sum(0)
        assert torch.equal(a.argmax(1)[0], counts.argmax(-1))


def test_penalty_search_keeps_the_floor_for_features_without_information():
    """Noise features: the held-out search picks the infinite penalty (the floor) or a penalty so large
    that the read-out stays at the floor."""
    from benchmarks.probe.shortcut import fit_shortcut

    protocol = _protocol()
    for name in ("seg", "pointmap"):
        task, train, _, _ = _split(name, protocol, n_train=16)
        fit = fit_shortcut(task, _random_features(16, protocol, 3), train, protocol).fit
        assert math.isinf(fit.alpha) or fit.alpha >= 10.0, (name, fit.alpha)


LADDER = (0.0, 1.0, math.inf)


@pytest.mark.parametrize("name", TASKS)
def test_noisy_oracle_ladder_is_monotone(name):
    """Oracle features plus Gaussian noise at known levels score in the levels' order, from the exact
    oracle down to the floor (pure noise ties the floor within its interval)."""
    from benchmarks.analysis.noisy_oracle import ladder
    from benchmarks.probe.headline import PROBE_HEADLINE

    protocol = _protocol(max_train_samples=0, max_test_samples=0, bootstrap_resamples=100)
    rows = ladder(make_toy_data(n_train=12, n_test=6), name, LADDER, protocol)
    sign = 1.0 if PROBE_HEADLINE[name].higher_is_better else -1.0
    values = [sign * r["value"] for r in rows[:-1]]
    assert all(a >= b - 1e-9 for a, b in zip(values, values[1:])), (name, rows)
    assert values[0] > values[-2], (name, rows)
    noise, floor = rows[-2], rows[-1]
    lo, hi = floor["bounds"]
    assert lo - 1e-9 <= noise["value"] <= hi + 1e-9, (name, noise, floor)


def test_pixels_never_below_the_floor(tmp_path):
    """The raw-pixel baseline's paired difference to the floor is never negative beyond its interval."""
    from benchmarks.probe.api import run_probe
    from benchmarks.probe.compare import compare_records
    from sapiens2.records.results import read_record

    protocol = _protocol(max_train_samples=0, max_test_samples=0, bootstrap_resamples=200)
    data = make_toy_data(n_train=16, n_test=6)
    recs = {}
    for name in ("floor", "pixels"):
        for path in run_probe(name, TASKS, data, tmp_path, protocol=protocol):
            rec = read_record(path)
            rec["_path"] = str(path)
            recs[(name, rec["task"])] = rec
    for task in TASKS:
        assert recs[("floor", task)]["model"]["weights"] == "none"
        c = compare_records(recs[("pixels", task)], recs[("floor", task)])
        assert c["winner"] != "b", (task, c["verdict"])


def test_floor_is_a_reference_row_never_ranked():
    from leaderboard.rowinfo import KIND_LABELS, REFERENCE_KINDS, row_kind

    assert row_kind({"name": "floor", "backbone": "FeatureFreeFloor", "weights": "none"}, {}) == "floor"
    assert "floor" in REFERENCE_KINDS and "oracle" in REFERENCE_KINDS and "floor" in KIND_LABELS
    assert row_kind({"name": "pixels", "weights": "none"}, {}) == "weight-free"
    from benchmarks.cli.run import DEFAULT_BACKBONES, QUICK_BACKBONES
    from benchmarks.probe.backbones import FLOOR, weight_free
    from benchmarks.probe.backbones.presets import backbone_table

    assert FLOOR in DEFAULT_BACKBONES and FLOOR in QUICK_BACKBONES and weight_free(FLOOR)
    assert {r["name"]: r["family"] for r in backbone_table()}[FLOOR] == "floor"
