"""The report's first tables: per protocol, model x task headlines with shared ranks and the share of the
floor-to-oracle gap closed, and beside them the paired verdicts (task x backbone, against the floor
and against the backbone's own random-init twin).

Numbers of different protocols never share a column: the probe's 29-class seg mIoU and a reference
system's 2-class person/background mIoU are in different tables. Each value carries its interval,
its rank (:mod:`leaderboard.standing`: shared where no interval, or paired verdict, separates rows)
and n; the reference rows (ceiling, floor) are apart and never ranked, and so is a reference system
(MediaPipe): it is shown for orientation under its own protocol. Small-n rows, a column that is 0
for every row and an interval of exactly [0, 0] each get a note that says why.
"""

from __future__ import annotations

import pandas as pd

from leaderboard.catalog import board_tasks, metric_note, summary_metrics
from leaderboard.protocols import ProtocolInfo
from leaderboard.report_view import Cell, Column, Row, TableView, fmt, random_first_note
from leaderboard.rowinfo import KIND_LABELS, REFERENCE_KINDS, UNRANKED_KINDS
from leaderboard.standing import (
    ZERO_DIFFERENCE_NOTE,
    all_zero_note,
    gap_closed,
    gap_text,
    is_small_n,
    paired_winners,
    rank_text,
    ranks,
    small_n_note,
    zero_interval_note,
)

#: summary row order: the ceiling first, the floor second (fixed places), then measured rows by kind
KIND_ORDER = ["oracle", "floor", "pretrained", "unknown", "random-init", "weight-free", "reference"]
VERDICT_MARK = {"a": "▲", "b": "▼", None: "="}


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _families(mine: pd.DataFrame, infos: dict[str, ProtocolInfo]) -> dict[tuple, list[str]]:
    """Protocol keys grouped into summary tables: one per protocol kind and name.

    A probe protocol has one id per task (each task's knobs hashed apart), so the tasks of one named
    protocol share a table; two keys of one task never do (they are split by key). A reference
    system's protocol (MediaPipe's 2-class person/background seg, its shared-keypoint pose) has a name
    of its own, hence a table of its own.
    """
    fams: dict[tuple, list[str]] = {}
    for pk in dict.fromkeys(mine["protocol_key"]):
        info = infos.get(pk)
        fams.setdefault((pk.partition(":")[0], info.label if info else pk), []).append(pk)
    out: dict[tuple, list[str]] = {}
    for fam, pkeys in fams.items():
        tasks = mine[mine["protocol_key"].isin(pkeys)].drop_duplicates(["task", "protocol_key"])["task"]
        if tasks.is_unique:
            out[fam] = pkeys
        else:
            out.update({(*fam, pk): [pk] for pk in pkeys})
    return out


def summary_views(long: pd.DataFrame, infos: dict[str, ProtocolInfo],
                  verdicts: list[dict] | None = None) -> list[TableView]:
    """One summary per protocol (and so label set), measured rows only, each with its verdict table.

    Args:
        long: the long frame (``leaderboard.tables.records_to_frame``).
        infos: protocol infos by key.
        verdicts: paired comparisons as :func:`leaderboard.comparisons.folded_comparisons` makes them
            (display names, protocol id, winner); they decide the ranks of the pairs they cover and fill
            each summary's verdict table.
    """
    mine = long[long["source"] == "reproduced"]
    tasks = [t for t in board_tasks() if summary_metrics(t)]  # the table as it is now (tasks added late too)
    views = []
    for n, (fam, pkeys) in enumerate(_families(mine, infos).items()):
        g = mine[mine["protocol_key"].isin(pkeys)]
        specs = [(t, spec) for t in tasks for spec in summary_metrics(t)
                 if ((g["task"] == t) & (g["metric"] == spec.key)).any()]
        ids = {pk.partition(":")[2] for pk in pkeys}
        mine_v = [v for v in verdicts or [] if v["protocol_id"] in ids]
        views.append(_summary_table(n, fam, pkeys, g, specs, infos, mine_v))
    # measured backbones first; tables of reference systems alone (MediaPipe) after them
    return sorted(views, key=lambda v: not v.rows or all(r.kind == "reference" for r in v.rows))


def _order(g: pd.DataFrame) -> pd.DataFrame:
    keys = g.drop_duplicates(["model_key", "dataset"])
    keys = keys.assign(_k=keys["kind"].map(lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 9))
    return keys.sort_values(["_k", "model"], kind="stable").reset_index(drop=True)


def _lookup(g: pd.DataFrame, keys: pd.DataFrame, task: str, spec) -> list[dict | None]:
    """Per row of ``keys``: the value, interval and n of ``task``'s ``spec`` in display units, or None."""
    out = []
    for _, k in keys.iterrows():
        hit = g[(g["model_key"] == k["model_key"]) & (g["dataset"] == k["dataset"]) & (g["task"] == task)
                & (g["metric"] == spec.key)]
        if not len(hit):
            out.append(None)
            continue
        h, s = hit.iloc[0], spec.scale
        out.append({"value": h["value"] * s, "std": h["std"] * s, "low": h["ci_low"] * s,
                    "high": h["ci_high"] * s, "desc": h["ci_desc"], "n": h["n"], "pid": h["protocol_id"]})
    return out


def _column_cells(keys, hits, task: str, spec, ranked, paired, notes) -> list[Cell]:
    """The value cells of one column: value, interval, rank and n; notes for a zero column or interval."""
    label = f"{task}: {spec.label}"
    rk = ranks([h["value"] if h and ranked[i] else None for i, h in enumerate(hits)],
               [h["low"] if h else None for h in hits], [h["high"] if h else None for h in hits],
               spec.higher_is_better, paired)
    distinct = len({r for r in rk if r is not None}) > 1
    # a column whose ranked values are all equal (pose AP 0 for every row) has nothing to rank
    n_ranked = sum(r is not None for r in rk) if len({h["value"] for i, h in enumerate(hits)
                                                       if h and ranked[i]}) > 1 else 0
    texts = rank_text(rk)
    cells = []
    for i, h in enumerate(hits):
        if h is None:
            cells.append(Cell("-", ""))
            continue
        text = fmt(h["value"]) + ("" if _missing(h["std"]) else f" ± {fmt(h['std'])}")
        ci = "" if _missing(h["low"]) or _missing(h["high"]) else f"[{fmt(h['low'])}, {fmt(h['high'])}]"
        sub = []
        if rk[i] is not None and n_ranked > 1:
            sub.append(f"rank {texts[i]}")
        if not _missing(h["n"]):
            sub.append(f"n={int(h['n'])}" + (" small" if is_small_n(h["n"]) else ""))
        title = h["desc"] if ci else ""
        if rk[i] is not None and n_ranked > 1:
            title += ("; " if title else "") + (
                f"rank {rk[i]}: {rk[i] - 1} row(s) better beyond the intervals"
                + (" (shared: no interval or paired verdict separates it from the others of this rank)"
                   if texts[i].startswith("=") else ""))
        cls = "best" if rk[i] == 1 and distinct else ""
        cls += " small" if is_small_n(h["n"]) else ""
        cells.append(Cell(text, repr(float(h["value"])) if not _missing(h["value"]) else "", cls.strip(), ci,
                          title, " · ".join(sub)))
    measured = [h for i, h in enumerate(hits) if h and ranked[i] and not _missing(h["value"])]
    if measured and all(h["value"] == 0 for h in measured):
        ns = [h["n"] for h in measured]
        notes.append(all_zero_note(label, len(measured), ns, metric_note(task, spec.key)))
    else:
        zero = [keys.at[i, "model"] for i, h in enumerate(hits)
                if h and h["low"] == 0 and h["high"] == 0]
        if zero:
            notes.append(zero_interval_note(label, zero))
    return cells


def _gap_cells(keys, hits) -> list[Cell] | None:
    """The share of the floor-to-oracle gap per row; None when the table lacks the floor or the oracle."""
    kinds = list(keys["kind"])
    ref = {k: next((h["value"] for h, kk in zip(hits, kinds) if h and kk == k), None)
           for k in ("floor", "oracle")}
    if _missing(ref["floor"]) or _missing(ref["oracle"]):
        return None
    cells = []
    for h in hits:
        share = None if h is None else gap_closed(h["value"], ref["floor"], ref["oracle"])
        cells.append(Cell(gap_text(share), "" if share is None else repr(share), "gap",
                          title="(value - floor) / (oracle - floor): 0% at the floor, 100% at the ceiling"))
    return cells


def _summary_table(n: int, fam: tuple, pkeys: list[str], g: pd.DataFrame, specs, infos,
                   verdicts: list[dict]) -> TableView:
    keys = _order(g)
    ranked = [k not in UNRANKED_KINDS for k in keys["kind"]]
    cols = [Column("model", "t"), Column("kind", "t")]
    multi_ds = g["dataset"].nunique() > 1
    if multi_ds:
        cols.append(Column("dataset", "t"))
    columns: list[list[Cell]] = []
    notes: list[str] = []
    small: list[int] = []
    random_first = []
    for t, spec in specs:
        hits = _lookup(g, keys, t, spec)
        label = f"{t}: {spec.label}"
        head = spec.key == summary_metrics(t)[0].key
        paired = paired_winners(list(keys["model"]), verdicts, t) if head else {}
        cells = _column_cells(keys, hits, t, spec, ranked, paired, notes)
        cols.append(Column(f"{label} {'↑' if spec.higher_is_better else '↓'}", "", spec.higher_is_better,
                           metric_note(t, spec.key)))
        columns.append(cells)
        small += [int(h["n"]) for h in hits if h and is_small_n(h["n"])]
        first = {keys.at[i, "kind"] for i, c in enumerate(cells) if "best" in c.cls}
        if "random-init" in first and "pretrained" not in first:  # a shared first place needs no excuse
            random_first.append(t)
        gap = _gap_cells(keys, hits) if head else None
        if gap is None:  # on a phone's cards a value without a gap beside it takes the whole line
            for c in cells:
                c.cls = f"{c.cls} solo".strip()
        else:
            cols.append(Column(f"{t}: gap closed", "gap", True))
            columns.append(gap)
    rows, ceiling = [], []
    for i, k in keys.iterrows():
        kind = KIND_LABELS.get(k["kind"], k["kind"])
        cells = [Cell(k["model"], k["model"], "t"), Cell(kind, k["kind"], "t kind")]
        if multi_ds:
            cells.append(Cell(k["dataset"], k["dataset"], "t"))
        cells += [col[i] for col in columns]
        (ceiling if k["kind"] in REFERENCE_KINDS else rows).append(
            Row(k["model"], k["kind"], cells, f"reproduced k-{k['kind']}"))
    info = infos.get(pkeys[0])
    label = fam[1] if len(fam) == 2 else f"{fam[1]} [{fam[2].partition(':')[2]}]"  # one name, two keys
    if small:
        notes.insert(0, small_n_note(small))
    if all(k == "reference" for k in keys["kind"]):
        notes.append("A reference system (an external pretrained model under its own protocol): shown for "
                     "orientation, never ranked.")
    if random_first:
        notes.append(random_first_note(random_first))
    if len(pkeys) > 1 or (info and info.key.startswith("probe:")):
        ids = sorted({(t, pk) for t, pk in zip(g["task"], g["protocol_key"])},
                     key=lambda x: _task_index(x[0]))
        notes.append("Protocol ids (one per task): "
                     + "; ".join(f"{t} {pk.partition(':')[2]}" for t, pk in ids))
    safe = "".join(c if c.isalnum() else "-" for c in label)[:40]
    view = TableView(f"summary-{n}-{safe}", f"Summary — {label}", cols, rows, ceiling,
                     info if len(pkeys) == 1 else None, sorted(g["dataset"].unique()), notes)
    view.verdicts = verdict_view(view.id, keys, [t for t, _ in specs], verdicts, small)
    return view


def verdict_view(table_id: str, keys: pd.DataFrame, tasks: list[str], verdicts: list[dict],
                 small: list[int]) -> TableView | None:
    """Backbone x task: each backbone against the floor and against its twin (the paired verdicts).

    A cell lists the row's comparisons on that task as ``▲ floor`` (better beyond the paired interval),
    ``▼`` (worse beyond it) or ``=`` (within it), the other side named ``floor``, ``twin`` (a random-init
    backbone) or by its name. None when no comparison concerns this table.
    """
    tasks = list(dict.fromkeys(tasks))
    kinds = dict(zip(keys["model"], keys["kind"]))
    mine = [v for v in verdicts if v["a"] in kinds and v["b"] in kinds and v["task"] in tasks]
    if not mine:
        return None
    tasks = [t for t in tasks if any(v["task"] == t for v in mine)]
    cols = [Column("model", "t")] + [Column(t, "t verdict") for t in tasks]
    rows, notes = [], []
    zero = False
    for model in [m for m in keys["model"] if any(v["a"] == m for v in mine)]:
        cells = [Cell(model, model, "t")]
        for t in tasks:
            parts, titles = [], []
            for v in (v for v in mine if v["a"] == model and v["task"] == t):
                other = "floor" if kinds[v["b"]] == "floor" else "twin" if kinds[v["b"]] == "random-init" \
                    else v["b"]
                mark = VERDICT_MARK[v["winner"]]
                parts.append(f"{mark} {other}" + (" (identical)" if v["zero"] else ""))
                titles.append(f"vs {v['b']}: {v['verdict']}; a - b = {v['difference']}")
                zero |= v["zero"]
            cls = "t verdict" + (" up" if parts and all(p.startswith("▲") for p in parts) else "")
            cells.append(Cell(parts[0] if parts else "-", "", cls, " ".join(parts[1:]), "; ".join(titles)))
        rows.append(Row(model, kinds[model], cells, f"reproduced k-{kinds[model]}"))
    level = sorted({f"{100 * v['level']:g}" for v in mine})
    notes.append(f"▲ better / ▼ worse beyond the {'/'.join(level)}% paired bootstrap interval of the "
                 "difference (same resampled test images for both); = within it: no difference shown. "
                 "floor: the feature-free floor; twin: the backbone's random-init twin (the same "
                 "architecture untrained).")
    if zero:
        notes.append(ZERO_DIFFERENCE_NOTE)
    if small:  # the summary above says it in full
        notes.append(f"n < 30 here: verdicts on so few test images are tentative (n = "
                     f"{', '.join(map(str, sorted(set(small))))}).")
    return TableView(f"{table_id}-verdicts", "Paired verdicts", cols, rows, notes=notes)


def _task_index(task: str) -> int:
    names = list(board_tasks())
    return names.index(task) if task in names else len(names)
