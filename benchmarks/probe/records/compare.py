"""Paired comparison of two backbones' probe records: a bootstrap of the difference on the same images.

Two backbones probed under one protocol are scored on the same test images, and their per-image
errors are correlated (a hard scene is hard for both). Their marginal 95% intervals can overlap
while the difference is far from noise. The paired test resamples the test images once for both:
every probe record keeps its resampled metric values (side file, :mod:`benchmarks.probe.records.sidefile`),
drawn with the same fixed-seed resamples for the same n and image order, so resample ``r`` of A and
resample ``r`` of B score the same images and ``dist_a[r] - dist_b[r]`` is a resampled difference.
The interval is the percentile interval of those differences (:func:`paired_difference`).

Records are paired only when that holds: same protocol id, dataset content, n, bootstrap seed and
resamples, and test-image ids (``images_sha256``); anything else is refused with a ValueError
naming both records.

Example:
    >>> paired_difference([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    (0.0, 0.0)
    >>> paired_difference([2.0, 3.0, 4.0, float("nan")], [1.0, 1.0, 1.0, 1.0], level=0.5)
    (1.5, 2.5)
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from benchmarks.probe.records.headline import PROBE_HEADLINE, Headline, format_interval
from benchmarks.probe.records.sidefile import (
    check_resample_counts,
    content_sha256,
    images_sha256,
    read_side_file,
)
from evaluators.bootstrap import percentile_interval
from leaderboard.catalog import board_tasks
from leaderboard.comparisons import COMPARISON_HASH_FIELD, comparison_hash
from sapiens2.records.results import load_records
from sapiens2.records.view import Record, RecordView, record_views

# the protocol ids a comparison may pair under: None (any), one id or a comma string, several, or by task
ProtocolIds = str | Sequence[str] | Mapping[str, str] | None

TITLE = "paired comparisons ({pct}% paired bootstrap of the difference, same test images)"


def paired_difference(dist_a: np.ndarray, dist_b: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """``(low, high)``: the percentile interval of ``dist_a - dist_b`` (NaN differences skipped).

    Args:
        dist_a: A's metric on each resample (1-D).
        dist_b: B's metric on the same resamples (same length, same order).
        level: coverage of the interval.

    Returns:
        The interval; ``(nan, nan)`` when no resample has both values.

    Raises:
        ValueError: not two 1-D arrays of one length, or a bad ``level``.
    """
    a, b = np.asarray(dist_a, dtype=np.float64), np.asarray(dist_b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"paired_difference: expected two 1-D arrays of one length (the same resamples), "
                         f"got shapes {a.shape} and {b.shape}")
    return percentile_interval(a - b, level)


def _where(rec: RecordView) -> str:
    return rec.path or f"record {rec.run_id}"


def _side(rec: RecordView, other: RecordView) -> tuple[dict[str, np.ndarray], Path]:
    """The record's resampled values, checked against the record (ids and content hashes)."""
    iv = rec.intervals
    name = iv.side_file if iv else None
    pair = f"(pairing {_where(rec)} with {_where(other)})"
    if iv is None or iv.method != "bootstrap" or not name:
        raise ValueError(f"{_where(rec)} names no bootstrap side file (intervals.side_file) {pair}: a record "
                         "made before paired comparisons, or a mean over seeds that disagree; probe it again")
    if not rec.path:
        raise ValueError(f"{_where(rec)}: the record's file is unknown, so its side file {name} "
                         "cannot be found")
    path = Path(rec.path).parent / name
    try:
        dists, ids = read_side_file(path)
    except FileNotFoundError as e:
        raise ValueError(f"{path}: missing bootstrap side file of {_where(rec)} {pair}") from e
    check_resample_counts(path, dists, iv.resamples)  # before any arithmetic on the values
    if images_sha256(ids) != iv.images_sha256:
        raise ValueError(f"{path}: its image ids do not match intervals.images_sha256 of {_where(rec)}")
    if content_sha256(dists, ids) != iv.bootstrap_sha256:
        raise ValueError(f"{path}: its values do not match intervals.bootstrap_sha256 of {_where(rec)} "
                         "(a side file of another run?)")
    return dists, path


def paired_distributions(rec_a: Record, rec_b: Record, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The resampled ``metric`` of two records over the same resampled test images.

    Args:
        rec_a: a probe record (with ``_path``, as :func:`sapiens2.records.results.load_records` gives it).
        rec_b: the other one.
        metric: the metric key.

    Returns:
        (A's values, B's values), one per resample, resample ``r`` the same images in both.

    Raises:
        ValueError: the records differ in protocol id, dataset content, n, bootstrap seed, resamples
            or test-image ids, or a side file is missing, unreadable, or not the record's own, or lacks
            ``metric`` (the message names both records or the file).
    """
    rec_a, rec_b = RecordView.of(rec_a), RecordView.of(rec_b)
    both = f"{_where(rec_a)} and {_where(rec_b)}"
    checks = [
        ("protocol id", lambda r: r.protocol.id),
        ("task", lambda r: r.task),
        ("dataset content", lambda r: r.dataset.content_hash),
        ("n (test images)", lambda r: r.intervals and r.intervals.n),
        ("bootstrap seed", lambda r: r.intervals and r.intervals.seed),
        ("bootstrap resamples", lambda r: r.intervals and r.intervals.resamples),
        ("test images (images_sha256)", lambda r: r.intervals and r.intervals.images_sha256),
    ]
    for what, get in checks:
        va, vb = get(rec_a), get(rec_b)
        if va is None or vb is None or va != vb:
            raise ValueError(f"cannot pair {both}: different {what} ({va!r} vs {vb!r}); a paired bootstrap "
                             "needs the same protocol, test images and resamples")
    (da, pa), (db, pb) = _side(rec_a, rec_b), _side(rec_b, rec_a)
    for rec, d, p in ((rec_a, da, pa), (rec_b, db, pb)):
        if metric not in d:
            raise ValueError(f"{p}: no resampled values of {metric!r} (has {sorted(d)})")
        _check_point(rec, metric, d[metric], p)
    return da[metric], db[metric]


def _check_point(rec: RecordView, metric: str, dist: np.ndarray, path: Path) -> None:
    """The record's value must lie within the range of its own resampled values.

    A resample of all n test images is centred on the point value, so over the protocol's resamples
    the point value falls between their minimum and maximum; a headline edited after the fact (and
    the record rehashed) lands outside almost always, and is refused.
    """
    value = rec.metric(metric)
    finite = dist[np.isfinite(dist)]
    if value is None or not finite.size:
        return
    lo, hi = float(finite.min()), float(finite.max())
    slack = 1e-9 * max(1.0, abs(lo), abs(hi))
    if not lo - slack <= float(value) <= hi + slack:
        raise ValueError(f"{_where(rec)}: its {metric} {value:.6g} lies outside [{lo:.6g}, {hi:.6g}], the "
                         f"range of its own resampled values in {path}: the record's value was edited, or "
                         "the side file is another run's")


def _verdict(spec: Headline, low: float, high: float, a: str, b: str, level: float) -> tuple[str | None, str]:
    pct = f"{100 * level:g}"
    if not (math.isfinite(low) and math.isfinite(high)):
        return None, "undefined (no resample has both values)"
    if low > 0 or high < 0:
        a_higher = low > 0
        winner = "a" if a_higher == spec.higher_is_better else "b"
        return winner, f"{a if winner == 'a' else b} better beyond the {pct}% interval"
    return None, f"within the {pct}% interval"


def compare_records(rec_a: Record, rec_b: Record, level: float = 0.95) -> dict:
    """One task's paired comparison of two probe records on its probe headline metric.

    Returns:
        Plain JSON data: ``task, metric, label, higher_is_better, scale, a, b, value_a, value_b,
        difference`` (a - b, record units), ``low, high`` (its paired interval), ``level, n, resamples,
        bootstrap_seed, protocol_id, seed_a, seed_b, record_a, record_b``, ``winner`` (``"a"``,
        ``"b"`` or None), ``verdict`` (text) and ``display`` (the table's text cells ``metric, value_a,
        value_b, difference`` in display units, for reports that format nothing themselves).
    """
    rec_a, rec_b = RecordView.of(rec_a), RecordView.of(rec_b)
    task = rec_a.task
    spec = PROBE_HEADLINE[task]
    da, db = paired_distributions(rec_a, rec_b, spec.key)
    low, high = paired_difference(da, db, level)
    va, vb = rec_a.metric(spec.key), rec_b.metric(spec.key)
    a, b = rec_a.model.name, rec_b.model.name
    winner, verdict = _verdict(spec, low, high, a, b, level)
    iv = rec_a.intervals
    out = {
        "task": task, "metric": spec.key, "label": spec.label, "higher_is_better": spec.higher_is_better,
        "scale": spec.scale, "a": a, "b": b, "value_a": va, "value_b": vb,
        "difference": None if va is None or vb is None else va - vb,
        "low": low if math.isfinite(low) else None, "high": high if math.isfinite(high) else None,
        "level": level, "n": iv.n, "resamples": iv.resamples, "bootstrap_seed": iv.seed,
        "protocol_id": rec_a.protocol.id,
        "seed_a": rec_a.seeds[0], "seed_b": rec_b.seeds[0],
        "record_a": _where(rec_a), "record_b": _where(rec_b), "winner": winner, "verdict": verdict,
        "record_hash_a": rec_a.record_hash, "record_hash_b": rec_b.record_hash,
    }
    out["display"] = dict(zip(("metric", "value_a", "value_b", "difference"), comparison_cells(out)[1:5]))
    out[COMPARISON_HASH_FIELD] = comparison_hash(out)
    return out


def check_comparisons(comparisons: list[dict], records: list[Record],
                      where: str = "the comparisons") -> list[dict]:
    """The comparisons (duplicates dropped), each checked against its seal and the ``records`` being built.

    A comparison must carry its seal (:func:`leaderboard.comparisons.comparison_hash`, so hand-edited
    numbers or verdicts are refused), both records it was made from must be among ``records`` (by
    record hash), and its values must be those records' values.

    Raises:
        ValueError: naming ``where``, the comparison (task, A, B) and what does not hold.
    """
    by_hash = {r.record_hash: r for r in record_views(records) if r.record_hash}
    kept, seen = [], set()
    for i, c in enumerate(comparisons):
        name = f"{where}: comparison {i} ({c.get('task')}, {c.get('a')} vs {c.get('b')})"
        seal = c.get(COMPARISON_HASH_FIELD)
        if seal is None:
            raise ValueError(f"{name}: not sealed ({COMPARISON_HASH_FIELD} missing): made by an older "
                             "version; make it again with compare --json or run --compare")
        if comparison_hash(c) != seal:
            raise ValueError(f"{name}: its fields do not match its {COMPARISON_HASH_FIELD} (edited after it "
                             "was made); make it again from the records")
        for side in ("a", "b"):
            rec = by_hash.get(c.get(f"record_hash_{side}"))
            if rec is None:
                raise ValueError(f"{name}: record {c.get(f'record_{side}')} it was made from is not among "
                                 "the records being built (other records, or another dataset); build it "
                                 "with those records, or compare these ones")
            if rec.model.name != c[side] or rec.task != c["task"] or \
                    rec.metric(c["metric"]) != c[f"value_{side}"]:
                raise ValueError(f"{name}: its {side} side does not match record {_where(rec)}")
        if seal not in seen:
            seen.add(seal)
            kept.append(c)
    return kept


def _wanted_ids(protocol_id: ProtocolIds, task: str) -> set[str] | None:
    """The protocol ids ``task`` may be compared under (None: any).

    ``protocol_id``: None, one id, several (a comma string or a list; each task has its own id, so
    a task takes the one its records carry), or ``{task: id}``.
    """
    if protocol_id is None:
        return None
    if isinstance(protocol_id, Mapping):
        return {protocol_id[task]} if task in protocol_id else set()
    ids = protocol_id.split(",") if isinstance(protocol_id, str) else protocol_id
    return {str(i).strip() for i in ids}


def _by_pid(recs: list[RecordView]) -> dict[str, list[RecordView]]:
    out: dict[str, list[RecordView]] = {}
    for r in recs:
        out.setdefault(r.protocol.id, []).append(r)
    return out


def _pick(recs_a: list[RecordView], recs_b: list[RecordView], a: str, b: str, task: str,
          protocol_id: ProtocolIds) -> tuple[RecordView, RecordView]:
    """The one-seed records of A and B to pair: the common protocol, then the lowest common seed."""
    pa, pb = _by_pid(recs_a), _by_pid(recs_b)
    wanted = _wanted_ids(protocol_id, task)
    pids = sorted(set(pa) & set(pb) & (set(pa) if wanted is None else wanted))
    if not pids:
        raise ValueError(f"cannot pair {a} and {b} on {task}: different protocol id (no record of both under "
                         f"{protocol_id or 'one protocol'}; {a}: {sorted(pa)} in "
                         f"{[_where(r) for r in recs_a]}; {b}: {sorted(pb)} in "
                         f"{[_where(r) for r in recs_b]})")
    if len(pids) > 1:
        raise ValueError(f"{a} and {b} on {task} have records under several protocols {pids}: "
                         "name one (protocol_id / --protocol)")
    def by_seed(recs: list[RecordView], name: str) -> dict[int, RecordView]:
        out: dict[int, RecordView] = {}
        for r in recs:
            seed = r.seeds[0]
            if seed in out:
                raise ValueError(f"two {task} records of {name} under {pids[0]} for seed {seed}: "
                                 f"{_where(out[seed])} and {_where(r)}; compare a folder that holds one")
            out[seed] = r
        return out

    seeds_a, seeds_b = by_seed(pa[pids[0]], a), by_seed(pb[pids[0]], b)
    common = sorted(set(seeds_a) & set(seeds_b))
    if common:
        return seeds_a[common[0]], seeds_b[common[0]]
    return seeds_a[min(seeds_a)], seeds_b[min(seeds_b)]


def comparisons_from_records(records: list[Record], a: str, b: str, tasks: str | Sequence[str] | None = None,
                             protocol_id: ProtocolIds = None,
                             level: float = 0.95, where: str = "the records") -> list[dict]:
    """:func:`compare_records` per task for backbones ``a`` and ``b`` among loaded ``records``.

    Only one-seed probe records are paired (a mean over seeds points to its first seed's side file).
    ``tasks=None``: every task that both backbones have (under one of the ``protocol_id`` ids when
    given), in the task table's order. ``protocol_id``: see :func:`_wanted_ids` (each task has its
    own protocol id: ``ProbeProtocol.protocol_ids()`` is a valid value).

    Raises:
        ValueError: ``a == b``, a backbone without probe records, a requested task one of them lacks,
            no task in common, or records that cannot be paired (see :func:`paired_distributions`).
    """
    if a == b:
        raise ValueError(f"compare: a backbone is compared with another one, got {a!r} twice")
    probe = [r for r in record_views(records) if r.protocol.kind == "probe" and len(r.seeds) == 1]
    mine = {name: [r for r in probe if r.model.name == name] for name in (a, b)}
    for name, recs in mine.items():
        if not recs:
            known = sorted({r.model.name for r in probe})
            raise ValueError(f"no one-seed probe record of backbone {name!r} in {where} "
                             f"(backbones there: {known})")
    have = {name: {r.task for r in recs} for name, recs in mine.items()}
    if tasks is None:
        tasks = [t for t in board_tasks() if t in have[a] and t in have[b]]
        if protocol_id is not None:  # only the tasks whose records carry one of the ids
            def ids(name: str, t: str) -> set[str]:
                return set(_by_pid([r for r in mine[name] if r.task == t]))

            tasks = [t for t in tasks if _wanted_ids(protocol_id, t) & ids(a, t) & ids(b, t)]
        if not tasks:
            raise ValueError(f"{a} ({sorted(have[a])}) and {b} ({sorted(have[b])}) share no task in {where}")
    else:
        tasks = [t.strip() for t in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
        for t in tasks:
            for name in (a, b):
                if t not in have[name]:
                    raise ValueError(f"no {t} probe record of {name!r} in {where} "
                                     f"(its tasks: {sorted(have[name])})")
    out = []
    for t in tasks:
        rec_a, rec_b = _pick([r for r in mine[a] if r.task == t], [r for r in mine[b] if r.task == t],
                             a, b, t, protocol_id)
        out.append(compare_records(rec_a, rec_b, level))
    return out


def paired_comparisons(records_dir: str | os.PathLike, a: str, b: str,
                       tasks: str | Sequence[str] | None = None,
                       protocol_id: ProtocolIds = None, level: float = 0.95) -> list[dict]:
    """The paired comparison of backbones ``a`` and ``b`` per task, from the probe records under a folder.

    Args:
        records_dir: a results folder (searched recursively, as the leaderboard reads it).
        a: backbone name (the records' ``model.name``).
        b: the other backbone.
        tasks: task names or a comma string (None: every task both have).
        protocol_id: the protocol id(s) to compare under (None: the one both have; several: an
            error); each task has its own id, so several may be given (see :func:`_wanted_ids`).
        level: coverage of the paired interval.

    Returns:
        One dict per task (:func:`compare_records`): headline metric, values, a - b, its interval, n
        and the verdict.

    Raises:
        ValueError: see :func:`comparisons_from_records`.
    """

    records = load_records([records_dir], skip_foreign=True)
    return comparisons_from_records(records, a, b, tasks, protocol_id, level, where=str(records_dir))


def _spec(c: dict) -> Headline:
    return Headline(c["metric"], c["label"], c["higher_is_better"], c["scale"])


def comparison_cells(c: dict) -> list[str]:
    """Display cells of one comparison: task, metric (with direction), A, B, A - B [low, high], n, verdict."""
    spec = _spec(c)
    arrow = "higher" if spec.higher_is_better else "lower"
    diff = format_interval(spec, c["difference"], None if c["low"] is None else (c["low"], c["high"]))
    return [c["task"], f"{spec.label} ({arrow} is better)", format_interval(spec, c["value_a"]),
            format_interval(spec, c["value_b"]), diff, str(c["n"]), c["verdict"]]


def format_comparisons(comparisons: list[dict]) -> str:
    """A text table per compared pair, under a title naming the method.

    Example:
        >>> c = {"task": "seg", "metric": "mIoU", "label": "mIoU %", "higher_is_better": True, "scale": 1.0,
        ...      "a": "pre", "b": "pre-random", "value_a": 9.0, "value_b": 5.0, "difference": 4.0,
        ...      "low": 3.0, "high": 5.0, "level": 0.95, "n": 96,
        ...      "verdict": "pre better beyond the 95% interval"}
        >>> print(format_comparisons([c]))
        paired comparisons (95% paired bootstrap of the difference, same test images)
        pre vs pre-random
          task  metric                     pre   pre-random  pre - pre-random [95% CI]  n   verdict
          seg   mIoU % (higher is better)  9.00  5.00        4.00 [3.00, 5.00]          96  pre better beyond the 95% interval
    """  # noqa: E501
    if not comparisons:
        return "paired comparisons: none"
    pct = f"{100 * comparisons[0]['level']:g}"
    lines = [TITLE.format(pct=pct)]
    pairs = list(dict.fromkeys((c["a"], c["b"]) for c in comparisons))
    for a, b in pairs:
        rows = [["task", "metric", a, b, f"{a} - {b} [{pct}% CI]", "n", "verdict"]]
        rows += [comparison_cells(c) for c in comparisons if (c["a"], c["b"]) == (a, b)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.append(f"{a} vs {b}")
        lines += ["  " + "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)
