"""The probe's mean-over-seeds record: mean and population std of every metric, as documented.

A linear probe's seeds are identical (it trains nothing seed-dependent), so the end-to-end runs write
a std of 0 whatever the formula; these tests give the aggregation seeds that differ.
"""

from __future__ import annotations

import math

import pytest

from sapiens2.records.results import make_record, read_record

DATASET = {"name": "synth", "split": "test", "content_hash": "0" * 64, "num_samples": 8}


def _seed_record(seed: int, miou: float, macc: float) -> dict:
    return make_record(
        model={"name": "pixels"}, task="seg", dataset=DATASET,
        protocol={"kind": "probe", "protocol_id": "p-seedmean"}, metrics={"mIoU": miou, "mAcc": macc},
        config={"seed": seed}, seeds=[seed], conventions={}, timings={"train_s": 1.0},
    )


def _population_std(vals: list[float]) -> float:
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals))


@pytest.mark.parametrize("values", [(40.0, 44.0), (10.0, 11.0, 15.0)])
def test_mean_record_holds_the_mean_and_population_std_over_seeds(tmp_path, values):
    from benchmarks.probe.api import _write_mean

    recs = [_seed_record(s, v, 2 * v) for s, v in enumerate(values)]
    rec = read_record(_write_mean(tmp_path / "mean.json", recs))
    assert rec["seeds"] == list(range(len(values)))
    assert rec["metrics"]["mIoU"] == pytest.approx(sum(values) / len(values))
    # population std (divide by k); the sample std (k - 1) would be sqrt(k / (k - 1)) times larger
    assert rec["metrics_std"]["mIoU"] == pytest.approx(_population_std(list(values)), rel=1e-12)
    assert rec["metrics_std"]["mAcc"] == pytest.approx(2 * _population_std(list(values)), rel=1e-12)
    assert rec["timings"]["train_s"] == pytest.approx(len(values))
