"""Every evaluator computes exactly the metrics it declares (``evaluators.metric_decl``).

The catalog, the probe's intervals and headline, the tables and the report derive everything from
these declarations, so a metric an evaluator computes but does not declare (or declares but cannot
compute) fails here instead of going missing from a table.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluators.metric_decl import FieldValue, MetricDecl, expand_decls
from evaluators.registry import EVALUATORS, build_evaluator
from sapiens2.tasks import all_tasks, get_task, task_names

EVALUATORS.import_from_location()


def _dense_input(task: str, n: int = 3):
    """n samples of a dense task: random predictions (non-finite pixels included), GT and masks."""
    g = torch.Generator().manual_seed(7)
    h, w = 16, 12
    ev = build_evaluator(task)
    if get_task(task).feed.kind == "labels":
        c = ev.num_classes
        gt = torch.randint(0, c, (n, h, w), generator=g)
        gt[:, :2] = ev.ignore_index
        logits = torch.randn(n, c, h // 2, w // 2, generator=g)
        logits[0, :, 0, 0] = float("nan")
        return ev, (logits, gt), {}
    gt = torch.rand(n, 3, h, w, generator=g) + 0.5
    pred = gt + 0.1 * torch.randn(n, 3, h, w, generator=g)
    pred[0, :, 3, 3] = float("nan")
    mask = torch.rand(n, h, w, generator=g) > 0.2
    return ev, (pred, gt, mask), {}


def _pose_input(ev, n: int = 4, head_sizes: bool = False):
    rng = np.random.default_rng(3)
    k = ev.meta.num_keypoints
    gt_xy = rng.uniform(50, 150, (n, 1, 2)) + rng.normal(0, 20, (n, k, 2))
    lo, hi = gt_xy.min(1), gt_xy.max(1)
    boxes = np.concatenate([lo, hi - lo], 1)
    gt = np.concatenate([gt_xy, np.full((n, k, 1), 2.0)], 2)
    pred = gt_xy + rng.normal(0, 2, (n, k, 2))
    extra = {"gt_head_sizes": rng.uniform(20, 40, n)} if head_sizes else {}
    ev.update(pred, rng.uniform(0.3, 1, (n, k)), [1, 1, 2, 3][:n], index=np.arange(n), gt_keypoints=gt,
              gt_bboxes=boxes, **extra)


def _computed_keys(res: dict) -> set[str]:
    """Scalar metrics of a ``compute()`` result (conventions and ``per_*`` breakdowns aside)."""
    for key, value in res.items():
        if isinstance(value, dict):
            assert key == "conventions" or key.startswith("per_"), f"{key}: nested, yet no breakdown"
    return {k for k, v in res.items() if not isinstance(v, dict)}


SETTINGS = [
    *((t, {}) for t in task_names()),
    ("normal", {"exact_median": False, "angle_thresholds": (10.0,)}),
    ("pointmap", {"shift_aligned": True}),
    ("pointmap", {"aligned": False, "distance_thresholds": (0.5,), "angle_thresholds": (15.0,)}),
    ("seg", {"num_classes": 4}),
    ("pose", {"meta": "mpii16"}),  # MPII with GT head sizes: PCKh too
]


@pytest.mark.parametrize(("task", "kwargs"), SETTINGS, ids=[f"{t}-{sorted(k)}" for t, k in SETTINGS])
def test_computed_keys_equal_declared_keys(task, kwargs):
    if get_task(task).dense:
        ev, args, extra = _dense_input(task)
        ev = build_evaluator(task, **kwargs)
        if get_task(task).feed.kind == "labels" and "num_classes" in kwargs:
            args = (args[0][:, : ev.num_classes], args[1].clamp(max=ev.num_classes - 1))
        ev.update(*args, index=list(range(args[0].shape[0])), **extra)
    else:
        ev = build_evaluator(task, **kwargs)
        _pose_input(ev, head_sizes=kwargs.get("meta") == "mpii16")
    declared = [d.key for d in ev.declared_metrics()]
    assert len(declared) == len(set(declared))
    assert _computed_keys(ev.compute()) == set(declared)
    # every key declared bootstrapped is one the evaluator can resample
    dist = ev.bootstrap_distribution(list(ev.bootstrap_keys), resamples=4, seed=0)
    assert set(dist) == set(ev.bootstrap_keys) and all(v.shape == (4,) for v in dist.values())


@pytest.mark.parametrize("type_name", sorted(EVALUATORS.module_dict))
def test_every_registered_evaluator_declares_its_metrics(type_name):
    cls = EVALUATORS.get(type_name)
    assert cls.metrics, f"{type_name} declares no metrics"
    for d in cls().declared_metrics():
        assert d.label and (d.higher_is_better is None or isinstance(d.higher_is_better, bool)), d


@pytest.mark.parametrize("spec", all_tasks(), ids=lambda s: s.name)
def test_every_task_headline_is_a_declared_metric_that_can_head_a_table(spec):
    from leaderboard.catalog import headline_metric, summary_metrics

    decl = {d.key: d for d in build_evaluator(spec.name).declared_metrics()}[spec.headline]
    assert decl.headline_ok and decl.shown and decl.higher_is_better is not None
    head = headline_metric(spec.name)
    assert (head.label, head.higher_is_better, head.scale) == (decl.label, decl.higher_is_better, decl.scale)
    assert summary_metrics(spec.name)[0] == head


def test_templates_expand_per_setting_and_reject_contradictions():
    fields = {"p": (FieldValue("body", "Body"), FieldValue("hand", "Hand"))}
    decls = (MetricDecl("{p.key}/AP", "{p.label} AP %", True, scale=100.0, bootstrapped="body/*"),)
    out = expand_decls(decls, fields)
    assert [(d.key, d.label, d.bootstrapped) for d in out] == [("body/AP", "Body AP %", True),
                                                              ("hand/AP", "Hand AP %", False)]
    assert expand_decls(decls, {"p": ()}) == ()
    with pytest.raises(KeyError, match="template fields"):
        expand_decls(decls, {})
    with pytest.raises(ValueError, match="declared twice"):
        expand_decls((MetricDecl("a", "A", True), MetricDecl("a", "A2", True)), {})
    with pytest.raises(ValueError, match="must be bootstrapped"):
        expand_decls((MetricDecl("a", "A", True, interval=True),), {})
    with pytest.raises(ValueError, match="without a direction"):
        expand_decls((MetricDecl("n", "N", None, bootstrapped=True),), {})
