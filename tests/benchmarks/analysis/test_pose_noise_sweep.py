"""The pose noise sweep: exact keypoints score the ceiling, noise and the mean pose score lower."""

from __future__ import annotations

import numpy as np

from benchmarks.analysis.pose_noise_sweep import METRICS, format_table, sweep, train_mean_pose
from benchmarks.probe.protocol import quick_protocol


def fake_samples(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    h, w = quick_protocol().input_size
    out = []
    for i in range(n):
        centre = np.array([w / 2, h / 2]) + rng.normal(0, 2, 2)
        kpts = centre + rng.normal(0, 1, (308, 2)) * np.array([w / 6, h / 6])
        out.append({"index": i, "keypoints": np.clip(kpts, 1, [w - 2, h - 2]), "visibility": np.ones(308)})
    return out


def test_sweep_orders_the_levels_and_prints_a_table():
    protocol = quick_protocol()
    test = fake_samples(8, seed=1)
    rows = sweep(test, protocol, [0.0, 2.0], seed=0, resamples=50,
                 mean_pose=train_mean_pose(fake_samples(12, seed=2), protocol))
    exact, noisy, codec, mean = rows
    assert [r["label"] for r in rows] == ["0", "2", "UDP codec round trip", "train mean pose"]
    assert exact["n"] == 8
    assert exact["AP"][0] == 1.0 and exact["PCK@0.05"][0] == 1.0 and exact["EPE"][0] == 0.0
    assert noisy["EPE"][0] > exact["EPE"][0] and noisy["body/AP"][0] < 1.0
    assert mean["EPE"][0] > noisy["EPE"][0] and mean["PCK@0.1"][0] < noisy["PCK@0.1"][0]
    for r in rows:
        for m in METRICS:
            v, lo, hi = r[m]
            assert lo <= v <= hi or np.isclose(v, lo) or np.isclose(v, hi), (r["label"], m)
    assert codec["EPE"][0] < mean["EPE"][0]
    table = format_table(rows, markdown=True)
    assert table.count("\n") == len(rows) + 1 and "| train mean pose |" in table
