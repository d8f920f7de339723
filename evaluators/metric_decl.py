"""Metric declarations: every evaluator class states once which metrics it computes and what they mean.

An evaluator class lists its metrics in ``metrics``, a tuple of :class:`MetricDecl` (the way
lm-evaluation-harness registers a metric with ``higher_is_better`` and torchmetrics puts the
direction on the metric class). Everything else is derived from these declarations: the
evaluator's ``bootstrap_keys``, the probe's interval list, the leaderboard's columns, labels, units,
directions and notes (``leaderboard.catalog``), the report's columns and the direction of a task's
headline metric. A test runs every evaluator on a tiny input and checks that it computes exactly the
keys it declares, so a metric nothing declares fails there instead of going missing from a table.

Keys depending on an evaluator's settings (thresholds, keypoint parts, alignment variants) are
templates: ``"{t.key}"`` or ``"{part.key}/AP"`` are expanded over the :class:`FieldValue` tuples the
instance's ``metric_fields()`` returns (``str.format`` attribute fields, ``.key`` in keys, ``.label``
in labels). A flag that holds for some expanded keys only is a tuple of ``fnmatch`` patterns of
concrete keys (``shown=("within_10_cm",)``).

Example:
    >>> decls = (MetricDecl("mae", "MAE x1e-2", False, unit="data range", scale=100.0, headline_ok=True),
    ...          MetricDecl("{t.key}", "<{t.label} deg %", True, unit="%", shown=("within_5*",)))
    >>> fields = {"t": (FieldValue("within_5_0_deg", "5"), FieldValue("within_30_0_deg", "30"))}
    >>> [(d.key, d.label, d.shown) for d in expand_decls(decls, fields)][1:]
    [('within_5_0_deg', '<5 deg %', True), ('within_30_0_deg', '<30 deg %', False)]
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

#: a flag of a templated declaration: True/False for every expanded key, or ``fnmatch`` patterns of the
#: concrete keys it holds for
Selector = bool | str | tuple[str, ...]


@dataclass(frozen=True)
class FieldValue:
    """One value of a key template's field: its text in the key and in the column label."""

    key: str
    label: str


@dataclass(frozen=True)
class MetricDecl:
    """One metric an evaluator computes (a ``compute()`` key), and everything the rest of the code needs.

    Attributes:
        key: the ``compute()`` key (a template with ``{field.key}`` parts for settings-dependent keys).
        label: column header, with the display unit (``{field.label}`` parts for templates).
        higher_is_better: direction; None for what is not a score (a count, a setting such as the data
            range): never ranked, never bootstrapped.
        unit: unit of the computed value (``"%"``, ``"fraction"``, ``"deg"``, ``"px"``, ``"dB"``, ...).
        scale: display value = computed value * scale (a fraction shown in percent: 100).
        bootstrapped: ``bootstrap_intervals`` can resample it.
        interval: its bootstrap interval is stored in every probe record (implies ``bootstrapped``).
        headline_ok: it can head a table: a task may name it as its headline (``TaskSpec.headline``),
            the figures plot it and the delta columns compare it with the paper.
        summary: a column of the report's cross-task summary beside the task's headline.
        shown: a column of the task's leaderboard table (counts of non-finite predictions are shown by
            their own rule, ``leaderboard.catalog.is_nonfinite_count``, and are declared not shown).
        name: the leaderboard's name of the metric when it differs from ``key`` (pose:
            ``"AP"`` is ``"wholebody/AP"``); records may hold either.
        aliases: other record names of the same metric (older records).
        note: shown next to the column when its numbers mislead without it.
        requires: the name of a boolean attribute of the evaluator: the metric is computed only
            when it is true (an optional extra).
    """

    key: str
    label: str
    higher_is_better: bool | None
    unit: str = ""
    scale: float = 1.0
    bootstrapped: Selector = False
    interval: Selector = False
    headline_ok: Selector = False
    summary: Selector = False
    shown: Selector = True
    name: str = ""
    aliases: tuple[str, ...] = ()
    note: str = ""
    requires: str = ""

    @property
    def board_name(self) -> str:
        """The leaderboard's name of the metric (``name``, else ``key``)."""
        return self.name or self.key


_FLAGS = ("bootstrapped", "interval", "headline_ok", "summary", "shown")


def _selected(flag: Selector, key: str) -> bool:
    if isinstance(flag, bool):
        return flag
    patterns = (flag,) if isinstance(flag, str) else flag
    return any(fnmatchcase(key, p) for p in patterns)


def _fields_of(template: str) -> list[str]:
    """The field names (``t`` of ``{t.key}``) of a key template, in order of appearance."""
    names = []
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            root = field.split(".", 1)[0].split("[", 1)[0]
            if root and root not in names:
                names.append(root)
    return names


def expand_decls(
    decls: tuple[MetricDecl, ...],
    fields: Mapping[str, tuple[FieldValue, ...]],
    enabled: Callable[[str], bool] = lambda name: True,
) -> tuple[MetricDecl, ...]:
    """The concrete declarations of ``decls`` for one evaluator's settings.

    Args:
        decls: declarations, templates included.
        fields: the values of every template field (a field with no value expands to no metric).
        enabled: ``enabled(requires)`` says whether an optional metric is computed.

    Returns:
        One declaration per concrete key, in declaration order (a template's keys in the order of its
        fields' values), every flag resolved to a bool.

    Raises:
        KeyError: a template names a field ``fields`` does not give.
        ValueError: two declarations give the same concrete key, or one is bootstrapped without a
            direction, or is an interval metric without being bootstrapped.
    """
    out: dict[str, MetricDecl] = {}
    for d in decls:
        if d.requires and not enabled(d.requires):
            continue
        names = _fields_of(d.key)
        missing = [n for n in names if n not in fields]
        if missing:
            raise KeyError(f"metric {d.key!r}: no values for the template fields {missing}")
        for combo in itertools.product(*(fields[n] for n in names)):
            keys = dict(zip(names, (FieldValue(v.key, v.key) for v in combo)))
            labels = dict(zip(names, (FieldValue(v.label, v.label) for v in combo)))
            key = d.key.format(**{n: v for n, v in keys.items()}) if names else d.key
            label = d.label.format(**labels) if names else d.label
            name = d.name.format(**keys) if (names and d.name) else d.name
            flags = {f: _selected(getattr(d, f), key) for f in _FLAGS}
            concrete = replace(d, key=key, label=label, name=name, **flags)
            if key in out:
                raise ValueError(f"metric {key!r} is declared twice")
            if concrete.interval and not concrete.bootstrapped:
                raise ValueError(f"metric {key!r}: an interval metric must be bootstrapped")
            if concrete.higher_is_better is None and (concrete.bootstrapped or concrete.headline_ok):
                raise ValueError(f"metric {key!r}: a metric without a direction cannot be scored")
            out[key] = concrete
    return tuple(out.values())


def count_decl(key: str, label: str = "", unit: str = "count") -> MetricDecl:
    """A declared value that is not a score (a count or a setting): undirected and not shown."""
    return MetricDecl(key, label or key, None, unit=unit, shown=False)


def record_declarations(decls: tuple[MetricDecl, ...], metrics: Mapping[str, object],
                        headline: str) -> dict[str, dict]:
    """The ``metric_decls`` field of a result record: the concrete declaration of each of its metrics.

    A record carries what its metrics mean (as lm-evaluation-harness's results carry
    ``higher_is_better``), so a reader without the task's code (a plug-in task's records read by
    ``leaderboard build`` or ``compare``) still knows each label, unit, display scale, direction and
    interval, and which metric heads the task.

    Args:
        decls: the evaluator's concrete declarations (:func:`expand_decls`, ``declared_metrics()``).
        metrics: the record's metrics (only their declarations are written).
        headline: the task's headline metric (``TaskSpec.headline``; a key or another name of one).

    Example:
        >>> d = (MetricDecl("mae", "MAE x1e-2", False, unit="data range", scale=100.0, headline_ok=True),)
        >>> record_declarations(d, {"mae": 0.1}, "mae")["mae"]["scale"]
        100.0
    """
    out = {}
    for d in decls:
        names = (d.key, d.board_name, *d.aliases)
        key = next((n for n in names if n in metrics), None)
        if key is None:
            continue
        entry = {"label": d.label, "higher_is_better": d.higher_is_better, "unit": d.unit,
                 "scale": float(d.scale), "interval": bool(d.interval), "headline_ok": bool(d.headline_ok),
                 "shown": bool(d.shown), "summary": bool(d.summary)}
        if headline in names:
            entry["headline"] = True
        entry.update({k: v for k, v in (("name", d.name), ("note", d.note)) if v})
        if d.aliases:
            entry["aliases"] = list(d.aliases)
        out[key] = entry
    return out
