"""The main job's leaderboard on several splits side by side (the realistic split beside the procedural one).

Reads finished main-job output folders (``OUT/results`` records and ``OUT/comparisons.json``) and writes one
measurement file: per split, every row's headline per task (value, 95% interval, n, protocol id, the
share of the floor-to-oracle gap closed) and every paired comparison. :func:`leaderboard_markdown`
turns that file into the tables of ``docs/realistic_leaderboard.md`` (a generated block, checked by
``tests/benchmarks/test_docs_tables.py``), so no number there is typed by hand.

Example:
    python -m benchmarks.analysis.split_leaderboards realistic=out-real procedural=out-proc \\
        --json benchmarks/results/mainjob/realistic_vs_procedural_leaderboard.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.probe.backbones.presets import twin_pairs
from benchmarks.probe.records.compare import comparisons_from_records
from benchmarks.probe.records.headline import PROBE_HEADLINE, format_interval
from benchmarks.results import start_measurement, write_measurement
from leaderboard.rowinfo import row_kind
from leaderboard.standing import gap_closed, gap_text
from sapiens2.records.results import load_records
from sapiens2.records.view import RecordView
from sapiens2.tasks import task_names

_REFERENCE_KINDS = ("oracle", "floor")


def _records(results: list[Path]) -> dict[tuple[str, str], RecordView]:
    """``(backbone, task) -> record`` of main jobs' ``results`` folders (seed 0; the first folder wins)."""
    found = {}
    for folder in results:
        for path in sorted(folder.glob("*/*/*/seed0.json")):
            rec = RecordView.of(json.loads(path.read_text()))
            if rec.protocol.kind == "probe":
                found.setdefault((rec.model.name, rec.task), rec)
    if not found:
        raise ValueError(f"{', '.join(map(str, results))}: no probe records "
                         "(<backbone>/<protocol id>/<task>/seed0.json)")
    return found


def _comparisons(outs: list[Path], names: list[str], extra: list[tuple[str, str]]) -> tuple[list, list]:
    """The jobs' ``comparisons.json`` entries, plus the pairs they lack (every measured backbone vs the
    floor, twins, ``extra``) compared from the records of all ``outs``; ``(comparisons, skipped)``."""
    comps = []
    for out in outs:
        if (out / "comparisons.json").is_file():
            comps += json.loads((out / "comparisons.json").read_text())["comparisons"]
    have = {(c["a"], c["b"], c["task"]) for c in comps}
    wanted = [(n, "floor") for n in names if n not in ("floor", "gt-oracle")] + twin_pairs(names)
    wanted += [p for p in extra if set(p) <= set(names)]
    records, skipped = None, []
    for a, b in dict.fromkeys(wanted):
        if "floor" not in names and b == "floor":
            continue
        if any((a, b) == (x, y) for x, y, _ in have):
            continue
        if records is None:
            records = load_records([o / "results" for o in outs], skip_foreign=True)
        try:
            comps += comparisons_from_records(records, a, b, where=", ".join(map(str, outs)))
        except ValueError as e:
            skipped.append({"a": a, "b": b, "reason": str(e)})
    return comps, skipped


def split_rows(out: Path | list[Path], extra: list[tuple[str, str]] = ()) -> dict:
    """One split's rows and comparisons from one or more main-job folders (see the module docstring)."""
    outs = [out] if isinstance(out, Path) else list(out)
    records = _records([o / "results" for o in outs])
    kinds = {name: row_kind(rec.model.as_dict(), dict(rec.config)) for (name, _), rec in records.items()}
    refs = {(kinds[name], task): rec for (name, task), rec in records.items()
            if kinds[name] in _REFERENCE_KINDS}
    rows = []
    for (name, task), rec in records.items():
        spec = PROBE_HEADLINE[task]
        iv = rec.interval(spec.key)
        value = rec.metric(spec.key)
        floor, oracle = refs.get(("floor", task)), refs.get(("oracle", task))
        gap = None if floor is None or oracle is None else gap_closed(
            value, floor.metric(spec.key), oracle.metric(spec.key))
        rows.append({"backbone": name, "kind": kinds[name], "task": task, "metric": spec.key, "value": value,
                     "low": iv.lo if iv else None, "high": iv.hi if iv else None,
                     "n": rec.intervals.n if rec.intervals else None, "protocol_id": rec.protocol.id,
                     "gap_closed": gap, "dataset": rec.dataset.content_hash})
    comps, skipped = _comparisons(outs, list(dict.fromkeys(n for n, _ in records)), list(extra))
    keep = ("a", "b", "task", "metric", "value_a", "value_b", "difference", "low", "high", "n", "verdict")
    return {"rows": rows, "comparisons": [{k: c.get(k) for k in keep} for c in comps],
            "not_compared": skipped}


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    spec = PROBE_HEADLINE[row["task"]]
    bounds = None if row["low"] is None else (row["low"], row["high"])
    if row["value"] is not None and 0 < abs(row["value"] * spec.scale) < 1e-3:  # the oracle's error
        return f"{row['value'] * spec.scale:.2g} n={row['n']}"
    return format_interval(spec, row["value"], bounds, row["n"])


def _order(rows: list[dict]) -> list[str]:
    """Backbones: the oracle, the floor, then the others in the order of their first row."""
    names = list(dict.fromkeys(r["backbone"] for r in rows))
    place = {r["backbone"]: _REFERENCE_KINDS.index(r["kind"]) if r["kind"] in _REFERENCE_KINDS else 2
             for r in rows}
    return sorted(names, key=lambda n: place[n])


def headline_table(split: dict, tasks: list[str]) -> str:
    """Markdown: one row per backbone, each task's headline ``value [95% CI] n=N`` and the gap closed."""
    by = {(r["backbone"], r["task"]): r for r in split["rows"]}
    arrows = {t: "↑" if PROBE_HEADLINE[t].higher_is_better else "↓" for t in tasks}
    head = ["backbone"] + [f"{t} {PROBE_HEADLINE[t].label} {arrows[t]}" for t in tasks]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name in _order(split["rows"]):
        cells = []
        for t in tasks:
            row = by.get((name, t))
            measured = row is not None and row["kind"] not in _REFERENCE_KINDS
            gap = f" ({gap_text(row['gap_closed'])})" if measured else ""
            cells.append(_cell(row) + gap)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparison_table(split: dict) -> str:
    """Markdown: every paired comparison (a - b, its 95% paired interval, n, verdict)."""
    lines = ["| a vs b | task | a - b [95% paired CI] | n | verdict |", "|---|---|---|---|---|"]
    for c in split["comparisons"]:
        spec = PROBE_HEADLINE[c["task"]]
        bounds = None if c["low"] is None else (c["low"], c["high"])
        diff = format_interval(spec, c["difference"], bounds)
        lines.append(f"| {c['a']} vs {c['b']} | {c['task']} | {diff} | {c['n']} | {c['verdict']} |")
    return "\n".join(lines)


def _ranking(split: dict, task: str) -> list[str]:
    """The measured (non-reference) backbones of ``task``, best first."""
    spec = PROBE_HEADLINE[task]
    rows = [r for r in split["rows"] if r["task"] == task and r["kind"] not in _REFERENCE_KINDS]
    rows.sort(key=lambda r: r["value"] if not spec.higher_is_better else -r["value"])
    return [r["backbone"] for r in rows]


def _beyond_floor(split: dict, task: str) -> list[str]:
    """The backbones better than the floor beyond the paired interval on ``task``."""
    return [c["a"] for c in split["comparisons"]
            if c["task"] == task and c["b"] == "floor" and str(c["verdict"]).startswith(f"{c['a']} better")]


def changes_table(splits: dict, tasks: list[str]) -> str:
    """Markdown: per task and split, the ranking of the measured rows and those beyond the floor."""
    labels = list(splits)
    head = (["task"] + [f"ranking, {s} (best first)" for s in labels]
            + [f"beyond the floor, {s}" for s in labels])
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for t in tasks:
        ranks = [", ".join(_ranking(splits[s], t)) or "-" for s in labels]
        beyond = [", ".join(_beyond_floor(splits[s], t)) or "none" for s in labels]
        lines.append(f"| {t} | " + " | ".join(ranks + beyond) + " |")
    return "\n".join(lines)


def leaderboard_markdown(measurement: dict) -> str:
    """The generated block of ``docs/realistic_leaderboard.md`` from the measurement file's numbers."""
    splits = measurement["numbers"]["splits"]
    tasks = [t for t in task_names() if any(r["task"] == t for s in splits.values() for r in s["rows"])]
    parts = []
    for label, split in splits.items():
        ids = sorted({f"{r['task']} {r['protocol_id']}" for r in split["rows"]})
        parts += [f"#### {label} split", "", headline_table(split, tasks), "",
                  "Cells: value [95% interval] n=test images (gap closed between the floor and the oracle). "
                  f"Protocol ids: {', '.join(ids)}.", "", comparison_table(split), ""]
    parts += ["#### Ranking and separation", "", changes_table(splits, tasks)]
    return "\n".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=OUT[,OUT...]",
                    help="a split's label and its main-job output folder(s) (records of several jobs on "
                         "the same split are joined; the first folder's record wins)")
    ap.add_argument("--json", required=True, help="the measurement file to write")
    ap.add_argument("--compare", action="append", default=["dinov2_small:pixels"], metavar="A:B",
                    help="also compare A and B paired (default: dinov2_small:pixels)")
    ap.add_argument("--notes", default="", help="caveats kept with the numbers")
    args = ap.parse_args(argv)
    started = start_measurement()
    splits = {}
    for item in args.runs:
        label, sep, out = item.partition("=")
        if not sep or not label or not out:
            raise SystemExit(f"run {item!r}: expected LABEL=OUT (e.g. realistic=sapiens2-bench-out)")
        pairs = [tuple(p.split(":", 1)) for p in args.compare]
        splits[label] = split_rows([Path(o) for o in out.split(",")], pairs)
    path = write_measurement(args.json, "the main job's leaderboard on " + " and ".join(splits)
                             + " splits: headline with 95% intervals, paired comparisons",
                             {"splits": splits}, started=started, notes=args.notes)
    print(leaderboard_markdown(json.loads(Path(path).read_text())))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
