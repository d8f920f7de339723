"""Which metrics the leaderboard shows per task, in which order, units and direction.

Nothing here lists a metric: everything is derived from the metric declarations of each task's
evaluator (``metrics`` of the evaluator class, :mod:`evaluators.metric_decl`, expanded under the
task's official evaluator settings) and from the task table (``TaskSpec.headline``: the one metric
that heads a task, its tables, its summary column and the probe). An evaluator registered from
anywhere, with a task naming it, shows up here without an edit.

Record values are in the evaluators' units (pose AP/AR and albedo errors as fractions, seg in
percent, angles in degrees, pointmap distances in the evaluated frame: metres, or canonical
focal-768 coordinates as the official evaluator uses). ``scale`` converts a record value to
the displayed unit (pose AP 0.78 -> 78.0 %), so reported and reproduced numbers read alike.

Example:
    >>> [s.key for s in summary_metrics("pose")], headline_metric("seg").label
    (['EPE', 'wholebody/AP'], 'mIoU %')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from evaluators.metric_decl import MetricDecl
from evaluators.registry import EVALUATORS, build_evaluator
from sapiens2.records.declared import declared_tasks, headline_of, task_decls
from sapiens2.tasks import get_task, task_names


@dataclass(frozen=True)
class MetricSpec:
    """One displayed metric (the leaderboard's view of an evaluator's declaration).

    Attributes:
        key: leaderboard metric name (the official name; pose parts are ``part/stat``).
        label: column header.
        higher_is_better: direction used for ranks, "best" marks and plot annotations.
        scale: display value = record value * scale.
        headline_ok: it can head a table: plotted in the figures, compared in delta columns.
        note: shown next to the column ("" for none).
    """

    key: str
    label: str
    higher_is_better: bool
    scale: float = 1.0
    headline_ok: bool = False
    note: str = ""


@dataclass(frozen=True)
class _TaskView:
    source: tuple  # (task spec, evaluator class) the view was derived from
    decls: tuple  # the evaluator's concrete MetricDecl tuple
    shown: tuple[MetricSpec, ...]
    names: dict[str, str]  # every record name of a declared metric -> its leaderboard name


_VIEWS: dict[str, _TaskView] = {}


def _spec(d) -> MetricSpec:
    return MetricSpec(d.board_name, d.label, bool(d.higher_is_better), d.scale, d.headline_ok, d.note)


def board_tasks() -> tuple[str, ...]:
    """The tasks a report can show: the task table's, then those only records declare (a plug-in task's
    records read without its code, :mod:`sapiens2.records.declared`), in the order first read."""
    table = task_names()
    return table + tuple(t for t in declared_tasks() if t not in table)


def _make_view(source: tuple, decls: tuple) -> _TaskView:
    names = {d.key: d.board_name for d in decls}
    names.update({a: d.board_name for d in decls for a in d.aliases})
    shown = tuple(_spec(d) for d in decls if d.shown and d.higher_is_better is not None)
    return _TaskView(source, decls, shown, names)


def _declared_view(task: str) -> _TaskView | None:
    """The view of a task known only from its records' declarations (None: no record declared it)."""
    declared = task_decls(task)
    if not declared:
        return None
    view = _VIEWS.get(task)
    if view is None or view.source != (None, declared):
        decls = tuple(MetricDecl(d.key, d.label, d.higher_is_better, unit=d.unit, scale=d.scale,
                                 bootstrapped=d.interval, interval=d.interval, headline_ok=d.headline_ok,
                                 summary=d.summary, shown=d.shown, name=d.name, aliases=d.aliases,
                                 note=d.note)
                      for d in declared)
        view = _VIEWS[task] = _make_view((None, declared), decls)
    return view


def _headline_name(task: str) -> str:
    """The headline metric of ``task``: its spec's, or the one its records declare (a task not loaded)."""
    if task in task_names():
        return get_task(task).headline
    declared = headline_of(task)
    if declared is None:
        raise ValueError(f"task {task!r}: not in the task table, and no record of it declares a headline")
    return declared.key


def _view(task: str) -> _TaskView | None:
    """The declarations of ``task``'s evaluator under its official settings, or, for a task not in the
    task table, the declarations its records carry (None: neither)."""
    if task not in task_names():
        return _declared_view(task)

    EVALUATORS.import_from_location()
    spec = get_task(task)
    source = (spec, EVALUATORS.module_dict.get(spec.evaluator))
    view = _VIEWS.get(task)
    if view is None or view.source[0] is not source[0] or view.source[1] is not source[1]:
        view = _VIEWS[task] = _make_view(source, build_evaluator(task).declared_metrics())
    return view


def task_metrics(task: str) -> list[MetricSpec]:
    """The columns of ``task``'s tables, in declaration order ([] for a name that is not a task)."""
    view = _view(task)
    return list(view.shown) if view else []


class _PerTask(Mapping):
    """``{task: task_metrics(task)}`` over the task table as it is when read (tasks added later too); a
    task only records declare is looked up too (:func:`board_tasks`), but not listed."""

    def __getitem__(self, task: str) -> list[MetricSpec]:
        if task not in board_tasks():
            raise KeyError(task)
        return task_metrics(task)

    def __iter__(self) -> Iterator[str]:
        return iter(task_names())

    def __len__(self) -> int:
        return len(task_names())


#: the displayed metrics of every task, in the task table's order
TASK_METRICS: Mapping[str, list[MetricSpec]] = _PerTask()


def headline_metric(task: str) -> MetricSpec:
    """The one metric heading ``task`` (``TaskSpec.headline``), with its declared label and direction.

    Raises:
        ValueError: the evaluator declares no such metric, or declares it unable to head a table.
    """
    view = _view(task)
    if view is None:
        raise ValueError(f"task {task!r}: not in the task table, and no record of it declares its metrics")
    head = _headline_name(task)
    name = view.names.get(head, head)
    for d in view.decls:
        if d.board_name == name:
            if not d.headline_ok or not d.shown:
                raise ValueError(f"task {task!r}: its headline {head!r} is declared not to head a table")
            return _spec(d)
    raise ValueError(f"task {task!r}: its headline {head!r} is no metric its evaluator declares")


def headline_ok_metrics(task: str) -> list[MetricSpec]:
    """The metrics that can head ``task``'s tables (figures and delta columns): its headline first."""
    specs = [s for s in task_metrics(task) if s.headline_ok]
    head = headline_metric(task).key if specs else None
    return sorted(specs, key=lambda s: s.key != head)


def summary_metrics(task: str) -> list[MetricSpec]:
    """The columns of ``task`` in the report's summary: its headline, then the metrics declared ``summary``.

    Example:
        >>> [s.key for s in summary_metrics("pose")], [s.key for s in summary_metrics("seg")]
        (['EPE', 'wholebody/AP'], ['mIoU'])
    """
    view = _view(task)
    if view is None:
        return []
    head = headline_metric(task)
    extra = [_spec(d) for d in view.decls if d.summary and d.shown and d.board_name != head.key]
    return [head, *extra]


def metric_note(task: str, key: str) -> str:
    """The declared note of a displayed metric (leaderboard name), "" for none."""
    return next((s.note for s in task_metrics(task) if s.key == key), "")


NONFINITE_PREFIXES = ("nonfinite", "num_nonfinite")


def is_nonfinite_count(key: str) -> bool:
    """True for a metric that counts non-finite prediction values (shown in every table that has it).

    Any metric whose last name part (after ``/`` or ``.``) starts with ``nonfinite`` or
    ``num_nonfinite``, e.g. ``num_nonfinite_pred`` or ``scale_aligned.nonfinite_pred``.

    Example:
        >>> is_nonfinite_count("num_nonfinite_pred"), is_nonfinite_count("mIoU")
        (True, False)
    """
    return key.replace("/", ".").rsplit(".", 1)[-1].startswith(NONFINITE_PREFIXES)


def canonical_metric(task: str, key: str) -> tuple[str, bool]:
    """The leaderboard name of a record metric, and whether ``key`` was another name of it.

    ``PoseEvaluator.compute()`` reports the whole-body stats under their bare official names
    (``AP``, ``AR .5``), older probe records also ``mAP``/``mAR``; all mean ``wholebody/<stat>``
    (the declarations' ``name`` and ``aliases``).

    Example:
        >>> canonical_metric("pose", "AP .5"), canonical_metric("pose", "mAR")
        (('wholebody/AP .5', True), ('wholebody/AR', True))
        >>> canonical_metric("seg", "mIoU")
        ('mIoU', False)
    """
    view = _view(task)
    name = view.names.get(key, key) if view else key
    return name, name != key


def canonical_model_key(name: str) -> str:
    """Normalise a model name so that paper names and our arch names match.

    ``"Sapiens2-0.4B"`` -> ``"sapiens2_0.4b"``, ``"Sapiens-1B*"`` -> ``"sapiens_1b"``,
    ``"DINOv3-7B"`` -> ``"dinov3_7b"``.
    """
    key = name.strip().lower().replace("*", "")
    for ch in " -/":
        key = key.replace(ch, "_")
    while "__" in key:
        key = key.replace("__", "_")
    return key.strip("_")
