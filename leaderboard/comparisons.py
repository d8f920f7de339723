"""Paired comparisons of two backbones in the report: plain data in, escaped rows out.

The report takes the comparison dicts that the probe's paired bootstrap makes (a difference of one
headline metric between two backbones on the same resampled test images, its interval and a
verdict) as plain data and formats nothing itself: each dict carries its ``display`` text cells.

Example:
    >>> c = {"task": "seg", "a": "m", "b": "m-random", "n": 96, "verdict": "m better beyond the 95% interval",
    ...      "level": 0.95, "display": {"metric": "mIoU % (higher is better)", "value_a": "9.00",
    ...      "value_b": "5.00", "difference": "4.00 [3.00, 5.00]"}}
    >>> comparison_rows([c])[0]["difference"]
    '4.00 [3.00, 5.00]'
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping

from leaderboard.standing import SMALL_N, ZERO_DIFFERENCE_NOTE, is_small_n, small_n_note

# Each comparison is sealed like a record: the SHA-256 of its other fields, which include the record
# hashes of the two records it was made from (``record_hash_a``, ``record_hash_b``).
COMPARISON_HASH_FIELD = "comparison_sha256"
KEYS = ("task", "a", "b", "n", "verdict", "level", "display")
DISPLAY = ("metric", "value_a", "value_b", "difference")
# the verdict right after the pair, so it stays in view on a narrow screen (the numbers follow it)
COLUMNS = (("task", "task"), ("a", "A"), ("b", "B"), ("verdict", "verdict"),
           ("difference", "A - B [interval]"), ("metric", "metric"), ("value_a", "A value"),
           ("value_b", "B value"), ("n", "n"))


def _finite_or_none(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    return obj


def comparison_hash(comparison: dict) -> str:
    """SHA-256 of a comparison's fields but its seal (canonical JSON; NaN as null, as it is written).

    Example:
        >>> comparison_hash({"a": 1, "b": float("nan")}) == comparison_hash({"b": None, "a": 1})
        True
    """
    payload = {k: v for k, v in comparison.items() if k != COMPARISON_HASH_FIELD}
    text = json.dumps(_finite_or_none(payload), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def comparison_rows(comparisons) -> list[dict[str, str]]:
    """One row of text cells per comparison (the keys of :data:`COLUMNS`), checked.

    Raises:
        ValueError: a comparison that is not a dict with :data:`KEYS` and ``display`` cells
            :data:`DISPLAY` (names its position and what is missing).
    """
    rows = []
    for i, c in enumerate(comparisons or []):
        if not isinstance(c, dict):
            raise ValueError(f"comparisons[{i}]: expected a dict, got {type(c).__name__}")
        missing = [k for k in KEYS if k not in c]
        shown = c.get("display")
        if not missing and not isinstance(shown, dict):
            missing = ["display (a dict)"]
        elif not missing:
            missing = [f"display.{k}" for k in DISPLAY if k not in shown]
        if missing:
            raise ValueError(f"comparisons[{i}]: missing {missing} (a paired comparison has {list(KEYS)})")
        verdict = str(c["verdict"]) + (" (identical predictions: see the note)" if _zero(c) else "")
        n = str(c["n"]) + (" (small n)" if is_small_n(c["n"]) else "")
        rows.append({"task": str(c["task"]), "a": str(c["a"]), "b": str(c["b"]),
                     **{k: str(shown[k]) for k in DISPLAY}, "n": n, "verdict": verdict})
    return rows


def _zero(c: dict) -> bool:
    """True for a difference of exactly 0 with the interval [0, 0] (the same predictions)."""
    return c.get("difference") == 0 and c.get("low") == 0 and c.get("high") == 0


def folded_comparisons(comparisons, display_names: Mapping[tuple[str, str, str], str] | None = None
                       ) -> list[dict]:
    """The comparisons that the summary folds in (ranks and the verdict table), in display names.

    Only comparisons that say which protocol they were made under and who won (``protocol_id`` and
    ``winner``, as the probe's paired bootstrap writes them) are folded; the others stay in the
    comparison table alone.

    Args:
        comparisons: the comparison dicts.
        display_names: ``(task, protocol id, record model name) -> display name`` of the rows (a
            random-init backbone is shown as ``name (random init)``); names not in it stay as they are.

    Returns:
        ``{"task", "protocol_id", "a", "b", "winner", "verdict", "difference", "level", "zero"}`` per
        comparison, ``difference`` the display text of A - B with its interval.
    """
    names = display_names or {}
    out = []
    for c in comparisons or []:
        if not isinstance(c, dict) or "winner" not in c or "protocol_id" not in c:
            continue
        key = (str(c["task"]), str(c["protocol_id"]))
        out.append({"task": key[0], "protocol_id": key[1], "a": names.get((*key, c["a"]), c["a"]),
                    "b": names.get((*key, c["b"]), c["b"]), "winner": c["winner"],
                    "verdict": str(c["verdict"]), "level": float(c["level"]),
                    "difference": str((c.get("display") or {}).get("difference", "")), "zero": _zero(c)})
    return out


def comparisons_view(comparisons) -> dict | None:
    """The report's comparison section ``{"title", "columns", "fields", "rows"}``; None without any."""
    rows = comparison_rows(comparisons)
    if not rows:
        return None
    levels = sorted({float(c["level"]) for c in comparisons})
    pct = "/".join(f"{100 * v:g}" for v in levels)
    notes = []
    if any(_zero(c) for c in comparisons):
        notes.append(ZERO_DIFFERENCE_NOTE)
    small = sorted({int(c["n"]) for c in comparisons if isinstance(c.get("n"), int) and c["n"] < SMALL_N})
    if small:
        notes.append(small_n_note(small))
    return {"columns": [label for _, label in COLUMNS], "fields": [k for k, _ in COLUMNS], "rows": rows,
            "notes": notes,
            "title": f"Paired comparisons ({pct}% paired bootstrap of the difference, same test images)"}
