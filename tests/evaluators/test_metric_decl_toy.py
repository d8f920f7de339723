"""A metric added by declaring it on an evaluator, with no central file edited, reaches every view.

The test registers a toy evaluator (the albedo evaluator plus a declared ``toy_mse``) and points the
albedo task at it; the catalog, the probe's interval list, a record's bootstrap intervals, the
leaderboard table and the report then show the toy metric from its declaration alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from evaluators.albedo import AlbedoEvaluator
from evaluators.metric_decl import MetricDecl
from evaluators.registry import EVALUATORS, build_evaluator
from sapiens2.tasks import get_task, register_task

TOY = MetricDecl("toy_mse", "MSE x1e-4", False, "data range^2", 1e4, bootstrapped=True, interval=True,
                 headline_ok=True, summary=True, note="toy_mse is the mean squared albedo error.")


class ToyAlbedoEvaluator(AlbedoEvaluator):
    """The albedo evaluator with one more declared metric: the pixel-pooled squared error."""

    metrics = (*AlbedoEvaluator.metrics, TOY)

    def compute_from_state(self, s):
        out = super().compute_from_state(s)
        out["toy_mse"] = float(s["sum_sq"]) / int(s["pixels"])
        return out

    def _bootstrap_values(self, s, keys):
        out = super()._bootstrap_values(s, [k for k in keys if k != "toy_mse"])
        if "toy_mse" in keys:
            out["toy_mse"] = s["sum_sq"] / s["pixels"]
        return {k: out[k] for k in keys}


@pytest.fixture
def toy_albedo():
    EVALUATORS.import_from_location()
    EVALUATORS.register_module(module=ToyAlbedoEvaluator)
    original = get_task("albedo")
    register_task(dataclasses.replace(original, evaluator="ToyAlbedoEvaluator"), replace=True)
    try:
        yield
    finally:
        register_task(original, replace=True)
        EVALUATORS.module_dict.pop("ToyAlbedoEvaluator")


def _record(ev, name: str):
    from benchmarks.probe.records.evaluate import bootstrap_intervals_field
    from benchmarks.probe.records.headline import interval_metrics
    from sapiens2.records.results import make_record

    g = torch.Generator().manual_seed(1)
    gt = torch.rand(6, 3, 8, 8, generator=g)
    pred = (gt + 0.1 * torch.randn(6, 3, 8, 8, generator=g)).clamp(0, 1)
    ev.update(pred, gt, torch.ones(6, 8, 8, dtype=torch.bool), index=list(range(6)))
    keys = interval_metrics("albedo", ev)
    intervals = bootstrap_intervals_field(ev, keys, resamples=50, level=0.95, seed=0)
    return make_record(model={"name": name}, task="albedo",
                       dataset={"name": "toy", "split": "test", "content_hash": "1" * 64},
                       protocol={"kind": "eval"}, metrics=ev.compute(), config={"toy": True}, seeds=[0],
                       intervals=intervals)


def test_a_declared_toy_metric_reaches_catalog_intervals_tables_and_report(toy_albedo, tmp_path):
    from benchmarks.probe.records.headline import INTERVAL_METRICS
    from leaderboard.build import build_site
    from leaderboard.catalog import TASK_METRICS, headline_ok_metrics, metric_note, summary_metrics
    from leaderboard.tables import group_tables, records_to_frame
    from sapiens2.records.results import write_record

    ev = build_evaluator("albedo")
    assert type(ev) is ToyAlbedoEvaluator and "toy_mse" in ev.bootstrap_keys
    spec = next(s for s in TASK_METRICS["albedo"] if s.key == "toy_mse")
    assert (spec.label, spec.higher_is_better, spec.scale) == ("MSE x1e-4", False, 1e4)
    assert metric_note("albedo", "toy_mse") == TOY.note
    assert "toy_mse" in [s.key for s in headline_ok_metrics("albedo")]
    assert [s.key for s in summary_metrics("albedo")] == ["mae", "toy_mse"]
    assert INTERVAL_METRICS["albedo"] == ("mae", "rmse", "psnr", "toy_mse")

    rec = _record(ev, "toy-model")
    value = rec["metrics"]["toy_mse"]
    assert value == pytest.approx(rec["metrics"]["rmse"] ** 2)
    low, high = rec["intervals"]["bounds"]["toy_mse"]
    assert low <= value <= high

    (table,) = group_tables(records_to_frame([rec]))
    assert ("toy_mse", "MSE x1e-4", False) in table.metric_columns
    assert table.rows["MSE x1e-4"].iloc[0] == pytest.approx(value * 1e4)
    assert np.isfinite(table.ci_low["MSE x1e-4"].iloc[0])

    write_record(tmp_path / "rec" / "toy.json", rec)
    md = build_site([tmp_path / "rec"], tmp_path / "site", with_figures=False)["markdown"].read_text()
    assert "albedo: MSE x1e-4 ↓" in md  # a summary column
    assert "| MSE x1e-4" in md or "MSE x1e-4 |" in md  # a column of the albedo table
    assert "**MSE x1e-4**: " + TOY.note.replace("_", "\\_") in md  # its note, Markdown-escaped


def test_the_toy_metric_leaves_with_its_evaluator(toy_albedo):
    from leaderboard.catalog import TASK_METRICS

    assert "toy_mse" in [s.key for s in TASK_METRICS["albedo"]]
    register_task(dataclasses.replace(get_task("albedo"), evaluator="AlbedoEvaluator"), replace=True)
    assert "toy_mse" not in [s.key for s in TASK_METRICS["albedo"]]
