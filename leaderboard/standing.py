"""What wins and how sure: ranks that rows share where their intervals do not separate them, the share
of the floor-to-oracle gap a row closes, the small-n flag and the reasons behind numbers that look
like bugs (a metric that is 0 for every row, an interval of exactly [0, 0]).

A rank says how many rows are better *beyond their intervals*: ``rank = 1 + the number of rows whose
interval lies wholly on the better side of this row's``. Rows that no interval separates share a
rank, so a rank is never given to noise. Where a paired comparison of two rows exists (the probe's
paired bootstrap of the difference on the same test images), its verdict decides that pair instead:
it is the sharper test (two rows' per-image errors are correlated, so their marginal intervals
overlap more often than their difference is noise). A row without an interval counts as its point
value alone.

Example:
    >>> ranks([5.91, 5.90, 3.0], [5.8, 5.8, 2.9], [6.0, 6.0, 3.1], higher_is_better=True)
    [1, 1, 3]
    >>> rank_text([1, 1, 3])
    ['=1', '=1', '3']
    >>> round(gap_closed(30.0, floor=20.0, oracle=60.0), 3), gap_closed(5.0, floor=4.0, oracle=4.0)
    (0.25, None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: below this many test samples a row's interval is rough (a percentile bootstrap under-covers at
#: small n) and its rank is flagged in every table it reaches
SMALL_N = 30

SMALL_N_NOTE = (
    "small n: fewer than {limit} test samples (n = {ns}). Bootstrap intervals this small are rough (a "
    "percentile bootstrap under-covers at small n) and ranks from them are tentative; run a larger split "
    "before reading a winner off this table."
)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _span(value, low, high) -> tuple[float, float] | None:
    """A row's interval, its point value when it has none, None without a value."""
    if _missing(value):
        return None
    if _missing(low) or _missing(high):
        return float(value), float(value)
    return float(low), float(high)


def beats(a: tuple[float, float], b: tuple[float, float], higher_is_better: bool) -> bool:
    """True when interval ``a`` lies wholly on the better side of interval ``b`` (no overlap).

    Example:
        >>> beats((6.1, 6.3), (5.8, 6.0), True), beats((5.9, 6.3), (5.8, 6.0), True)
        (True, False)
    """
    return a[0] > b[1] if higher_is_better else a[1] < b[0]


def ranks(values: Sequence, lows: Sequence, highs: Sequence, higher_is_better: bool,
          paired: Mapping[tuple[int, int], int | None] | None = None) -> list[int | None]:
    """Each row's rank: 1 + the rows better than it beyond the intervals (None for a row without a value).

    Args:
        values: the rows' values (NaN or None: not ranked).
        lows: the rows' interval lower bounds (NaN or None: no interval).
        highs: the upper bounds.
        higher_is_better: direction.
        paired: ``{(i, j): winner}`` for pairs with a paired comparison: ``winner`` is ``i``, ``j`` or
            None (within the paired interval); it decides that pair instead of the marginal intervals.

    Returns:
        One rank per row.
    """
    spans = [_span(v, lo, hi) for v, lo, hi in zip(values, lows, highs)]
    paired = paired or {}
    out: list[int | None] = []
    for i, si in enumerate(spans):
        if si is None:
            out.append(None)
            continue
        better = 0
        for j, sj in enumerate(spans):
            if j == i or sj is None:
                continue
            if (i, j) in paired or (j, i) in paired:
                winner = paired.get((i, j), paired.get((j, i)))
                better += winner == j
            else:
                better += beats(sj, si, higher_is_better)
        out.append(1 + better)
    return out


def paired_winners(models: Sequence[str], verdicts, task: str, protocol_key: str | None = None
                   ) -> dict[tuple[int, int], int | None]:
    """``{(i, j): winner}`` for :func:`ranks`: the paired comparisons of rows ``i`` and ``j``.

    Args:
        models: the rows' display names.
        verdicts: folded comparisons (``task, protocol_id, a, b, winner``; names as displayed).
        task: the table's task.
        protocol_key: the table's protocol key (``probe:<id>``); None: every comparison of the task.
    """
    index = {m: i for i, m in enumerate(models)}
    out: dict[tuple[int, int], int | None] = {}
    for v in verdicts or []:
        if v["task"] != task or v["a"] not in index or v["b"] not in index:
            continue
        if protocol_key is not None and protocol_key != f"probe:{v['protocol_id']}":
            continue
        i, j = index[v["a"]], index[v["b"]]
        out[(i, j)] = {"a": i, "b": j}.get(v["winner"])
    return out


def rank_text(rank_list: Sequence[int | None]) -> list[str]:
    """Ranks as text: a rank that several rows share reads ``=k``; none ``-``.

    Example:
        >>> rank_text([1, 2, 2, None])
        ['1', '=2', '=2', '-']
    """
    counts: dict[int, int] = {}
    for r in rank_list:
        if r is not None:
            counts[r] = counts.get(r, 0) + 1
    return ["-" if r is None else (f"={r}" if counts[r] > 1 else str(r)) for r in rank_list]


def gap_closed(value, floor, oracle) -> float | None:
    """The share of the floor-to-oracle gap that ``value`` closes: 0 at the floor, 1 at the oracle.

    Direction-free: (value - floor) / (oracle - floor), negative below the floor, above 1 beyond the
    oracle. None when a value is missing or the floor equals the oracle (no gap to close).
    """
    if _missing(value) or _missing(floor) or _missing(oracle) or float(oracle) == float(floor):
        return None
    return (float(value) - float(floor)) / (float(oracle) - float(floor))


def gap_text(share: float | None) -> str:
    """A share of the gap in percent (``-`` for none).

    Example:
        >>> gap_text(0.2213), gap_text(0.0031), gap_text(-0.05), gap_text(1.0), gap_text(None)
        ('22.1%', '0.31%', '-5.0%', '100%', '-')
    """
    if share is None:
        return "-"
    if share == 0.0:  # the floor itself (-0.0 too: a value equal to the floor)
        return "0%"
    if share == 1.0:
        return "100%"
    pct = 100 * share
    return f"{pct:.2f}%" if abs(pct) < 1 else f"{pct:.1f}%"


def is_small_n(n) -> bool:
    """True for a known number of test samples below :data:`SMALL_N`."""
    return not _missing(n) and int(n) < SMALL_N


def small_n_note(ns) -> str:
    """The note of a table with small-n rows (``ns``: their sample counts)."""
    shown = ", ".join(str(int(n)) for n in sorted({int(n) for n in ns}))
    return SMALL_N_NOTE.format(limit=SMALL_N, ns=shown)


def all_zero_note(labels, n_rows: int, ns, declared: str = "") -> str:
    """Why columns read 0 for every ranked row (``labels``: one column or several; ``declared``: the
    metrics' declared notes, if any)."""
    labels = [labels] if isinstance(labels, str) else list(labels)
    n = ", ".join(str(int(x)) for x in sorted({int(x) for x in ns if not _missing(x)})) or "unknown"
    what = labels[0] + " is" if len(labels) == 1 else ", ".join(labels[:-1]) + f" and {labels[-1]} are"
    text = (f"{what} 0 for every one of the {n_rows} measured row(s) (n = {n} test samples): a "
            "measured 0, not a missing value, and a column that cannot order these rows; compare them on "
            "the task's other columns.")
    return f"{text} {declared}" if declared else text


def zero_interval_note(label: str, models: Sequence[str]) -> str:
    """Why an interval reads exactly [0, 0]: the metric is 0 on every resample of the test images."""
    return (f"{label}: the interval of {', '.join(models)} is exactly [0, 0]: the metric is 0 on every "
            "bootstrap resample of the test images (no test image scores above 0), not a missing interval.")


ZERO_DIFFERENCE_NOTE = (
    "A difference of exactly 0 with the interval [0, 0] means the two backbones' per-image values are "
    "identical on every test image: they made the same predictions. Against the floor that is the "
    "read-out keeping the floor (its penalty search found that the features added nothing on held-out "
    "images: such a record's config.shortcut.alpha reads 'inf (train prior: the floor)'), not a failed "
    "comparison."
)
