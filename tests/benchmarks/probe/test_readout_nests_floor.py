"""Protocol v5: the read-out nests the feature-free floor, and the floor row (the noise ladder:
tests/benchmarks/probe/test_readout_ceiling.py)."""

from __future__ import annotations

import math

import pytest
import torch
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
    from benchmarks.probe.readout.ridge import fit_ridge, within_positions
    from benchmarks.probe.readout.ridge_sums import PositionSums, RidgeStats

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


def _same(a, b) -> bool:
    """Equal metric trees, NaN equal to NaN (a class absent from the test images)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _scores(data, protocol, stream_of, alphas=None) -> tuple[dict, dict]:
    """(read-outs, ``{task: metrics}``) of the streamed spine on ``data``."""
    from _probe_toy import fit_readouts

    from benchmarks.probe.readout.stream import scene_groups, score_group

    fits, tasks, loaders = fit_readouts(data, TASKS, protocol, stream_of, alphas)
    train, test = loaders[protocol.train_split], loaders[protocol.test_split]
    stream, metrics = stream_of(tasks), {}
    for _, test_group in scene_groups(train, test):
        evaluators, _ = score_group(test, test_group, tasks, stream, fits, protocol)
        metrics.update({t: ev.compute() for t, ev in evaluators.items()})
    return fits, metrics


@pytest.mark.slow
def test_readout_at_infinite_penalty_equals_the_floor():
    """At the infinite penalty the read-out of any features (the pixels': another grid, another shuffle
    factor than the floor's) scores the floor's metrics exactly on every task."""
    from _probe_toy import pixels_stream

    from benchmarks.probe.readout.feature_streams import ReferenceStream

    protocol = _protocol()
    data = make_toy_data(n_train=12, n_test=6)
    inf, inf_metrics = _scores(data, protocol, pixels_stream(protocol), alphas=())
    floor, floor_metrics = _scores(data, protocol, lambda tasks: ReferenceStream("floor", protocol))
    for name in TASKS:
        assert math.isinf(inf[name].fit.alpha) and not bool(inf[name].fit.weight.abs().max() > 0)
        assert math.isinf(floor[name].fit.alpha), "constant features: the floor's penalty is the infinite one"
        assert floor[name].r != inf[name].r
        assert _same(inf_metrics[name], floor_metrics[name]), name


@pytest.mark.slow
def test_penalty_search_keeps_the_floor_for_features_without_information():
    """Noise features: the held-out search picks the infinite penalty (the floor) or a penalty so large
    that the read-out stays at the floor."""
    from _probe_toy import fit_readouts

    from benchmarks.analysis.noisy_oracle import GroundTruthStream

    protocol = _protocol()
    data = make_toy_data(n_train=16, n_test=2, tasks=["seg", "pointmap"])
    fits, _, _ = fit_readouts(data, ["seg", "pointmap"], protocol,
                              lambda tasks: GroundTruthStream(tasks, protocol, math.inf, seed=3))
    for name, fit in fits.items():
        assert math.isinf(fit.fit.alpha) or fit.fit.alpha >= 10.0, (name, fit.fit.alpha)


@pytest.mark.slow
def test_pixels_never_below_the_floor(tmp_path):
    """The raw-pixel baseline's paired difference to the floor is never negative beyond its interval."""
    from benchmarks.probe.api import run_probe
    from benchmarks.probe.records.compare import compare_records
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
