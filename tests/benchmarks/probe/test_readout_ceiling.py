"""Validity of the linear read-out at both ends, on all five tasks (a tiny split, the streamed spine).

Features made of the scenes' own ground truth (:class:`~benchmarks.analysis.noisy_oracle.GroundTruthStream`:
every task's read-out targets at once, nothing else) at known noise levels: clean, small, large and
pure noise. The clean features must reach each task's ceiling, the levels must score in their order,
and the infinite penalty on the clean features must be the feature-free floor exactly.
"""

from __future__ import annotations

import json
import math

import pytest
from _probe_toy import make_toy_data

from benchmarks.analysis.noisy_oracle import GroundTruthStream, probe_stream
from benchmarks.probe.data.source import MemoryData
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.readout.feature_streams import ReferenceStream
from benchmarks.probe.records.headline import PROBE_HEADLINE

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")
MASKED = ("normal", "pointmap", "albedo")
LEVELS = (0.0, 1.0, 4.0, math.inf)  # clean, small, large, pure noise (x each channel RMS)


@pytest.fixture(scope="module")
def ladder():
    # stage stride 2: a quarter of the ground-truth channels of the default 4 (the same read-out)
    protocol = default_protocol().replace(input_size=(64, 48), decoder_stage_stride=2, bootstrap_resamples=20)
    toy = make_toy_data(n_train=8, n_test=4)
    # pose reads its scenes apart (as the synthetic split's crops): its heatmaps are on another grid
    split = {t: toy.samples[t] for t in TASKS if t != "pose"}
    split["pose"] = {k: [{**s, "image": s["image"].clone()} for s in v]
                     for k, v in toy.samples["pose"].items()}
    data = MemoryData(split, name="toy")

    def run(stream_of, alphas=None):
        return probe_stream(data, TASKS, stream_of, protocol, alphas)

    rows = {s: run(lambda tasks, s=s: GroundTruthStream(tasks, protocol, s)) for s in LEVELS}
    rows["inf-penalty"] = run(lambda tasks: GroundTruthStream(tasks, protocol, 0.0), alphas=())
    rows["floor"] = run(lambda tasks: ReferenceStream("floor", protocol))
    rows["oracle"] = run(lambda tasks: ReferenceStream("oracle", protocol))
    return rows


def _score(got, task):
    """The headline of ``task`` in one :func:`probe_stream` result."""
    return got[task]["metrics"][PROBE_HEADLINE[task].key]


def _headline(rows, row, task):
    return _score(rows[row], task)


@pytest.mark.slow
@pytest.mark.parametrize("row", [0.0, "oracle"])
def test_ground_truth_reaches_every_dense_ceiling(ladder, row):
    """The clean ground-truth stream (every task's targets in one feature set) and the oracle row
    (plain ground truth, task by task) both read to the ceiling."""
    assert _headline(ladder, row, "seg") == pytest.approx(100.0, abs=1e-9)
    assert _headline(ladder, row, "normal") < 1e-3  # degrees
    assert _headline(ladder, row, "pointmap") < 1e-4  # metres
    assert _headline(ladder, row, "albedo") < 1e-4
    # pose's ceiling is the heatmap decoding's: the oracle row's (the stream holds pose's heatmaps alone)
    assert _headline(ladder, row, "pose") == pytest.approx(_headline(ladder, "oracle", "pose"), rel=1e-9)
    for task in MASKED:  # the held-out rows keep the whole correction: it is the ground truth's
        got = ladder[row][task]["readout"]
        assert min(got["shrink"]) > 1 - 1e-5, (row, task, got)


def test_infinite_penalty_is_the_floor_exactly(ladder):
    for task in TASKS:
        assert ladder["inf-penalty"][task]["readout"]["alpha"] == "inf (train prior: the floor)"
        # every metric, bit for bit (JSON: a class absent from the split is NaN in both)
        same = json.dumps(ladder["inf-penalty"][task]["metrics"], sort_keys=True)
        assert same == json.dumps(ladder["floor"][task]["metrics"], sort_keys=True), task
        if task in MASKED:  # no correction to shrink: the factors are 0
            assert ladder["inf-penalty"][task]["readout"]["shrink"] == [0.0] * 3, task


@pytest.mark.parametrize("task", TASKS)
def test_noise_levels_score_in_their_order(ladder, task):
    sign = 1 if PROBE_HEADLINE[task].higher_is_better else -1
    values = [sign * _headline(ladder, s, task) for s in LEVELS]
    assert values[0] > values[1] > values[2] >= values[3] - 1e-9, (task, values)
    # pure noise carries nothing: it beats the floor by less than a twentieth of the floor-ceiling range
    # (on 6 train images a penalty it picks can fit the noise and score below the floor)
    floor, ceiling = sign * _headline(ladder, "floor", task), values[0]
    assert values[3] - floor <= 0.05 * (ceiling - floor), (task, values[3], floor)


def test_features_without_information_are_shrunk_to_the_floor(monkeypatch):
    """Pure noise, the penalty search as it is and forced to the smallest penalty (a fit of the noise):
    the held-out factors take the correction away (most are 0) and every masked task scores the floor's
    headline on the test images within 1 %."""
    from benchmarks.probe.readout import ridge

    protocol = default_protocol().replace(input_size=(64, 48), decoder_stage_stride=2, bootstrap_resamples=20)
    data = make_toy_data(n_train=16, n_test=6, tasks=list(MASKED))

    def noise(tasks):
        return GroundTruthStream(tasks, protocol, math.inf, seed=5)

    floor = probe_stream(data, MASKED, lambda tasks: ReferenceStream("floor", protocol), protocol)
    searched = probe_stream(data, MASKED, noise, protocol)
    monkeypatch.setattr(ridge, "_pick", lambda curve, var: min(curve))
    forced = probe_stream(data, MASKED, noise, protocol)
    factors = []
    for task in MASKED:
        assert forced[task]["readout"]["alpha"] == min(protocol.ridge_alphas), forced[task]["readout"]
        factors += forced[task]["readout"]["shrink"]
        for got in (searched, forced):
            assert _score(got, task) <= _score(floor, task) * 1.01, (task, got[task])
    assert sorted(factors)[len(factors) // 2] <= 0.1, factors  # the median channel: no correction left
