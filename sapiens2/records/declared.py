"""The metric declarations records carry (``metric_decls``, schema minor version 1), and the tasks known
from them.

A probe record states what each of its metrics means (label, unit, display scale, direction,
interval, which one heads the task), as the task's evaluator declares it
(``evaluators.metric_decl.record_declarations``). So a task whose code is not loaded (a plug-in's
records read by ``leaderboard build``, ``leaderboard validate`` or ``compare`` without ``--include``)
is still a task to every reader: :func:`read_record` remembers each valid record's declarations
here, by task, and the leaderboard's catalog reads them for a task that is not in the task table.
For a task of the table, its evaluator's declarations are authoritative.

Example:
    >>> rec = {"task": "toy_depth", "metrics": {"AbsRel": 0.01},
    ...        "metric_decls": {"AbsRel": {"label": "AbsRel %", "higher_is_better": False, "scale": 100.0,
    ...                                    "headline": True, "headline_ok": True}}}
    >>> decl_problems(rec), remember(rec)
    ([], None)
    >>> headline_of("toy_depth").label, "toy_depth" in declared_tasks()
    ('AbsRel %', True)
    >>> forget("toy_depth")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DeclaredMetric:
    """One metric as a record declares it (the fields of ``metric_decls``; see the record schema)."""

    key: str
    label: str
    higher_is_better: bool | None
    unit: str = ""
    scale: float = 1.0
    interval: bool = False
    headline: bool = False
    headline_ok: bool = False
    shown: bool = True
    summary: bool = False
    name: str = ""
    note: str = ""
    aliases: tuple[str, ...] = ()

    @classmethod
    def from_entry(cls, key: str, entry: Mapping) -> DeclaredMetric:
        """The declaration of ``key`` from its ``metric_decls`` entry (a schema-valid one)."""
        fields = {k: v for k, v in entry.items() if k != "aliases"}
        return cls(key=key, aliases=tuple(entry.get("aliases", ())), **fields)


_BY_TASK: dict[str, dict[str, DeclaredMetric]] = {}


def record_decls(record: Mapping) -> tuple[DeclaredMetric, ...]:
    """The declarations a record carries (empty for a record without ``metric_decls``)."""
    return tuple(DeclaredMetric.from_entry(k, v) for k, v in (record.get("metric_decls") or {}).items())


def decl_problems(record: Mapping) -> list[str]:
    """What is wrong with a (schema-valid) record's ``metric_decls``: a key without a metric value, more
    than one headline, or a headline without a direction."""
    decls = record_decls(record)
    problems = []
    missing = sorted(d.key for d in decls if d.key not in record["metrics"])
    if missing:
        problems.append(f"record.metric_decls: keys without a metric value: {missing}")
    heads = [d.key for d in decls if d.headline]
    if len(heads) > 1:
        problems.append(f"record.metric_decls: {len(heads)} metrics marked headline ({heads}); one heads "
                        "a task")
    for d in decls:
        if (d.headline or d.interval) and d.higher_is_better is None:
            problems.append(f"record.metric_decls.{d.key}: a headline or interval metric needs a direction")
    return problems


def remember(record: Mapping) -> None:
    """Keep a valid record's declarations under its task (the first declaration of a key is kept)."""
    decls = record_decls(record)
    if decls:
        known = _BY_TASK.setdefault(record["task"], {})
        for d in decls:
            known.setdefault(d.key, d)


def declared_tasks() -> tuple[str, ...]:
    """The tasks of the records read so far that declared their metrics, in the order first read."""
    return tuple(_BY_TASK)


def task_decls(task: str) -> tuple[DeclaredMetric, ...]:
    """The metrics the records of ``task`` declared (empty when none did)."""
    return tuple(_BY_TASK.get(task, {}).values())


def headline_of(task: str) -> DeclaredMetric | None:
    """The metric the records of ``task`` declared as its headline (None: none did)."""
    return next((d for d in task_decls(task) if d.headline), None)


def forget(task: str | None = None) -> None:
    """Drop what the records of ``task`` (None: every task) declared (tests that read toy records)."""
    if task is None:
        _BY_TASK.clear()
    else:
        _BY_TASK.pop(task, None)
