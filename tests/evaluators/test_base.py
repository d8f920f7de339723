"""The Evaluator contract: states, dedup by dataset index, merge, reset, errors, doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest
import torch

from evaluators.base import Evaluator
from evaluators.normal import NormalEvaluator


class SumEval(Evaluator):
    task = "demo"

    def __init__(self):
        super().__init__()
        self.add_state("total", torch.zeros((), dtype=torch.float64))
        self.add_state("peak", torch.zeros((), dtype=torch.float64), reduce="max")
        self.add_state("low", torch.full((), 1e9, dtype=torch.float64), reduce="min")
        self.conventions = {"pooling": "sum"}

    def batch_stats(self, x):
        return {"total": x, "peak": x, "low": x}

    def compute_from_state(self, s):
        return {"total": float(s["total"]), "peak": float(s["peak"]), "low": float(s["low"])}


def test_reduce_ops_and_conventions():
    ev = SumEval()
    ev.update(torch.tensor([1.0, 5.0, 2.0]))
    r = ev.compute()
    assert (r["total"], r["peak"], r["low"], r["num_samples"]) == (8.0, 5.0, 1.0, 3.0)
    assert r["conventions"] == {"pooling": "sum"}
    ev.reset()
    ev.update(torch.tensor([4.0]))
    assert ev.compute()["total"] == 4.0


def test_dedup_within_batch_across_updates_and_tail():
    ev = SumEval()
    ev.update(torch.tensor([1.0, 2.0, 100.0]), index=[0, 1, 0])  # in-batch repeat: first wins
    ev.update(torch.tensor([100.0, 3.0]), index=[1, 2])  # 1 was counted in an earlier update
    ev.update(torch.tensor([100.0]), index=[2])  # 2 sits in the tail
    r = ev.compute()
    assert r["total"] == 6.0 and r["num_samples"] == 3.0
    assert ev.seen_indices().tolist() == [0, 1, 2]


def test_merge_drops_tail_duplicates_and_rejects_committed_overlap():
    a, b = SumEval(), SumEval()
    a.update(torch.tensor([1.0, 2.0]), index=[0, 1])
    a.update(torch.tensor([3.0]), index=[2])
    b.update(torch.tensor([4.0]), index=[3])
    b.update(torch.tensor([100.0]), index=[0])  # padded duplicate in b's tail
    a.merge(b)
    assert a.compute()["total"] == 10.0 and a.compute()["num_samples"] == 4.0
    c, d = SumEval(), SumEval()
    c.update(torch.tensor([1.0]), index=[0])
    c.update(torch.tensor([1.0]), index=[1])
    d.update(torch.tensor([1.0]), index=[0])
    d.update(torch.tensor([1.0]), index=[5])
    with pytest.raises(ValueError, match="counted by both"):
        c.merge(d)


def test_merge_type_and_convention_checks():
    with pytest.raises(TypeError):
        SumEval().merge(NormalEvaluator())
    a, b = NormalEvaluator(), NormalEvaluator(angle_thresholds=(1.0, 2.0, 3.0, 4.0))
    with pytest.raises((ValueError, TypeError)):
        a.merge(b)


def test_bad_index_and_rows():
    ev = SumEval()
    with pytest.raises(ValueError, match="index"):
        ev.update(torch.tensor([1.0, 2.0]), index=[0])
    with pytest.raises(ValueError, match="index"):
        ev.update(torch.tensor([1.0]), index=[-1])
    with pytest.raises(ValueError, match="index"):
        ev.update(torch.tensor([1.0]), index=[0.5])
    with pytest.raises(ValueError, match="state 'total'"):
        ev.add_rows({"total": torch.zeros(2, 3)})
    with pytest.raises(KeyError, match="unknown states"):
        ev.add_rows({"nope": torch.zeros(2)})


def test_sync_is_noop_on_one_process_and_blocks_nothing():
    ev = SumEval()
    ev.update(torch.tensor([1.0]), index=[0])
    ev.sync()
    ev.update(torch.tensor([2.0]), index=[1])
    assert ev.compute()["total"] == 3.0


@pytest.mark.parametrize(
    "module",
    [
        "evaluators.base",
        "sapiens2.distributed",
        "evaluators.dense_common",
        "evaluators.seg",
        "evaluators.normal",
        "evaluators.pointmap",
        "evaluators.albedo",
        "evaluators.runner",
        "evaluators.folders",
        "evaluators.mm_metrics",
    ],
)
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0, f"{module} has no runnable example"
    assert res.failed == 0
