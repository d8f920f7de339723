"""The probe's headline metric per task, the metrics whose intervals every probe record stores, and
the intervals of a mean over seeds.

Both are derived: the headline is the task's (``TaskSpec.headline``, with the label and direction its
evaluator declares, ``leaderboard.catalog.headline_metric``), the interval metrics are those the
evaluator declares ``interval`` (:mod:`evaluators.metric_decl`). Pose is headed by the end-point
error ``EPE`` (pixels of a 1024x768-equivalent crop; lower is better): at the probe's 256x192 crops
the official 308-keypoint AP is nearly binary (docs/probing.md, pose noise sweep), while EPE is
linear in the keypoint error over the whole range. The official AP stays in every record.

Example:
    >>> PROBE_HEADLINE["pose"].key, PROBE_HEADLINE["seg"].key
    ('EPE', 'mIoU')
    >>> format_interval(PROBE_HEADLINE["seg"], 40.123, (38.5, 41.75), 96)
    '40.1 [38.5, 41.8] n=96'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluators.base import Evaluator
from evaluators.registry import build_evaluator
from leaderboard.catalog import board_tasks, headline_metric
from sapiens2.records.view import record_views
from sapiens2.tasks import task_names


@dataclass(frozen=True)
class Headline:
    """One task's headline metric as the probe shows it.

    Attributes:
        key: the evaluator's metric key.
        label: short column label (with the display unit).
        higher_is_better: direction.
        scale: display value = record value * scale.
        digits: significant digits shown.
    """

    key: str
    label: str
    higher_is_better: bool
    scale: float = 1.0
    digits: int = 3


def _headline(task: str) -> Headline:
    spec = headline_metric(task)
    return Headline(spec.key, spec.label, spec.higher_is_better, spec.scale)


class _PerTask(Mapping):
    """``{task: value(task)}`` over the task table as it is when read (a task added later too)."""

    def __init__(self, value: Callable[[str], object]) -> None:
        self._value = value

    def __getitem__(self, task: str) -> Any:
        if task not in board_tasks():  # the table's tasks, and those only records declare (compare)
            raise KeyError(task)
        return self._value(task)

    def __iter__(self) -> Iterator[str]:
        return iter(task_names())

    def __len__(self) -> int:
        return len(task_names())


#: the probe's headline per task: the task's headline (pose: EPE)
PROBE_HEADLINE: Mapping[str, Headline] = _PerTask(_headline)


def _declared_intervals(evaluator: Evaluator) -> tuple[str, ...]:
    return tuple(d.key for d in evaluator.declared_metrics() if d.interval)


def _task_intervals(task: str) -> tuple[str, ...]:
    return _declared_intervals(build_evaluator(task))


#: metrics bootstrapped into every probe record's ``intervals`` (declared ``interval`` by the task's
#: evaluator under its official settings; pose keeps the official whole-body AP and body AP beside EPE)
INTERVAL_METRICS: Mapping[str, tuple[str, ...]] = _PerTask(_task_intervals)


def interval_metrics(task: str, evaluator: Evaluator) -> list[str]:
    """The metrics ``evaluator`` declares ``interval`` (so also bootstrapped) under its settings.

    ``task`` names the record's task; the evaluator's own declarations decide (a toy or plug-in
    evaluator brings its own).
    """
    return list(_declared_intervals(evaluator))


def _decimals(v: float, digits: int) -> int:
    """Decimals that show ``v`` with ``digits`` significant digits (at most 6)."""
    if v == 0 or not math.isfinite(v):
        return 1
    return min(6, max(0, digits - 1 - math.floor(math.log10(abs(v)))))


def format_interval(spec: Headline, value: float | None, bounds: Sequence[float | None] | None = None,
                    n: int | None = None) -> str:
    """``value [low, high] n=N`` in display units (``-`` for a missing value; no bounds: value alone)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    d = _decimals(value * spec.scale, spec.digits)
    out = f"{value * spec.scale:.{d}f}"
    if bounds is not None and None not in tuple(bounds):
        lo, hi = (f"{b * spec.scale:.{d}f}" for b in bounds)
        out += f" [{lo}, {hi}]"
    if n is not None:
        out += f" n={n}"
    return out


# two-sided 97.5% Student t quantiles by degrees of freedom (k seeds: k - 1), for the 95% level
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def seed_intervals(records: list[dict]) -> dict | None:
    """The ``intervals`` of the mean over the seeds' ``records``.

    The seeds' bootstrap interval when every seed has the same value of every bounded metric (nothing
    seed-dependent was trained); otherwise, for the metrics every seed bounds, ``mean +- t *
    s / sqrt(k)`` over the k seeds (``s`` the sample std, ``t`` the 97.5% Student quantile; 95% level
    only, 2 to 10 seeds), ``method: "seeds"``.

    Example:
        >>> iv = {"level": 0.95, "method": "bootstrap", "resamples": 10, "seed": 0, "n": 4,
        ...       "bounds": {"mIoU": [1.0, 3.0]}}
        >>> recs = [{"metrics": {"mIoU": v}, "intervals": iv} for v in (2.0, 4.0)]
        >>> seed_intervals(recs)["bounds"]["mIoU"]
        [-9.706, 15.706]
        >>> seed_intervals(recs[:1] * 2)["method"]
        'bootstrap'
    """

    views = record_views(records)
    ivs = [r.intervals for r in views]
    if any(iv is None for iv in ivs):
        return None
    keys = sorted(set.intersection(*(set(iv.bounds) for iv in ivs)))
    if all(r.metric(k) == views[0].metric(k) for r in views for k in keys):
        return ivs[0].as_dict()
    k = len(views)
    if ivs[0].level != 0.95 or k - 1 not in _T975:
        return None
    bounds = {}
    for key in keys:
        vals = [r.metric(key) for r in views]
        if any(v is None for v in vals):
            continue
        m = sum(vals) / k
        half = _T975[k - 1] * math.sqrt(sum((v - m) ** 2 for v in vals) / (k - 1)) / math.sqrt(k)
        bounds[key] = [m - half, m + half]
    return {"level": 0.95, "method": "seeds", "resamples": None, "seed": None, "n": ivs[0].n,
            "bounds": bounds}
