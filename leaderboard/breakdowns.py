"""Per-class and per-part breakdowns: averaged over seeds from the records, shown as tables and figures.

Seg per-class values come from the records' ``breakdowns`` (the evaluator's per-class IoU, Acc, Dice,
... as fractions) and are shown in percent; pose per-part AP comes from the ``part/AP`` metrics. A
class without a value (``null``: 0/0, the class has no ground-truth pixels and, for IoU, is never
predicted either) reads "n/a".
"""

from __future__ import annotations

import pandas as pd

from leaderboard.catalog import task_metrics
from leaderboard.merge import model_name_key
from leaderboard.tables import GroupTable
from sapiens2.records.view import Record, record_views
from sapiens2.reference import seg_classes29

NA = "n/a"
#: breakdowns of these tasks are fractions; the report shows them in percent
PERCENT_TASKS = ("seg",)


def _seg_class_names() -> dict[str, str]:
    return {str(c["id"]): c["name"] for c in seg_classes29()["classes"]}


def record_breakdowns(records: list[Record]) -> dict[tuple[str, str], dict[str, pd.DataFrame]]:
    """Per-class / per-part breakdowns, averaged over seeds, per (task, protocol_key).

    Returns:
        ``{(task, protocol_key): {breakdown name: DataFrame(items x models)}}`` in the records' units;
        seg class ids are replaced by the 29 class names; models carry their display names
        (``name (random init)``).
    """
    acc: dict[tuple[str, str], dict[str, dict[str, list[dict]]]] = {}
    for rec in record_views(records):
        key = (rec.task, rec.protocol.key)
        for name, items in rec.breakdowns.items():
            acc.setdefault(key, {}).setdefault(name, {}).setdefault(model_name_key(rec)[0], []).append(items)
    names = _seg_class_names()
    out: dict[tuple[str, str], dict[str, pd.DataFrame]] = {}
    for key, by_name in acc.items():
        for name, by_model in by_name.items():
            cols = {}
            for model, lists in by_model.items():
                frame = pd.DataFrame(lists, dtype=float)
                cols[model] = frame.mean(axis=0, skipna=True)
            table = pd.DataFrame(cols)
            if key[0] == "seg" and set(table.index) <= set(names):
                table.index = [names[i] for i in table.index]
            out.setdefault(key, {})[name] = table
    return out


def display_breakdowns(t: GroupTable,
                       breakdowns: dict[str, pd.DataFrame] | None) -> list[tuple[str, pd.DataFrame]]:
    """The breakdown tables of one leaderboard table in display units, items x models.

    Per-class breakdowns first (IoU first), in percent for seg; then pose AP per part from the table's
    part columns. Models keep the table's row order (ceiling first).

    Returns:
        ``[(title, DataFrame items x models)]``.
    """
    out = []
    order = list(dict.fromkeys(t.rows["model"]))
    for name in sorted(breakdowns or {}, key=lambda n: (not n.startswith("IoU"), not n.startswith("Acc"), n)):
        table = breakdowns[name]
        table = table[[m for m in order if m in table.columns] + [m for m in table.columns if m not in order]]
        if t.task in PERCENT_TASKS:
            out.append((f"{name} (%)", table * 100.0))
        else:
            out.append((name, table))
    # the per-part AP columns the task declares (pose: ``<part>/AP``, the whole body aside)
    cols = {s.key.split("/")[0]: s.label for s in task_metrics(t.task)
            if s.key.endswith("/AP") and not s.key.startswith("wholebody/") and s.label in t.rows}
    if cols:
        d = t.rows[t.rows["source"] == "reproduced"].drop_duplicates("model")
        parts = pd.DataFrame({r["model"]: [r[c] for c in cols.values()] for _, r in d.iterrows()},
                             index=list(cols))
        if parts.notna().any().any():
            out.append(("AP per part (%)", parts))
    return out
