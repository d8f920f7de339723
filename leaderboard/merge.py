"""Which records are the same run, the same seed, the same dataset: merging rules of the leaderboard.

- **Runs** are identified by ``run_id``: a record read twice (a folder passed twice, a copy of a
  file) counts once; two different records with one run id are an error naming both files.
- **Seeds**: within one (model, task, protocol, dataset), records with the same seeds are repeats
  of one run, not extra seeds: the newest (``created_utc``) is used and a note names the others.
- **Datasets** are identified by their content hash only: the same folder name with different
  content is two datasets (labelled with a short hash), different names with the same content are
  one dataset. Records without a content hash fall back to ``name/split``.

Example:
    >>> recs = [{"dataset": {"name": "synth", "split": "test", "content_hash": h * 32}} for h in ("ab", "cd")]
    >>> sorted(dataset_labels(recs).values())
    ['synth/test [abababab]', 'synth/test [cdcdcdcd]']
"""

from __future__ import annotations

from collections import defaultdict

from leaderboard.catalog import canonical_model_key
from leaderboard.paper import protocol_key
from sapiens2.records.integrity import record_hash


class DuplicateRunError(ValueError):
    """Two different records that carry the same run id."""


def model_name_key(rec: dict) -> tuple[str, str]:
    """(display name, matching key) of a record's model; random-init models never match the published one."""
    name, key = rec["model"]["name"], canonical_model_key(rec["model"]["name"])
    if str(rec["model"].get("weights") or "").startswith("random"):
        name, key = f"{name} (random init)", f"{key}@random"
    return name, key


def dataset_key(rec: dict) -> str:
    """The identity of a record's dataset: its content hash, or ``name/split`` when it has none."""
    ds = rec["dataset"]
    return f"sha256:{ds['content_hash']}" if ds.get("content_hash") else f"name:{ds['name']}/{ds['split']}"


def dataset_labels(records: list[dict]) -> dict[str, str]:
    """A display label per dataset key, distinct for distinct keys.

    Returns:
        ``{dataset_key: label}``; the label is ``name/split`` (names of one content joined by
        `` = ``), with ``[<8 hex>]`` appended where one label would stand for several contents.
    """
    names: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        ds = rec["dataset"]
        names[dataset_key(rec)].add(f"{ds['name']}/{ds['split']}")
    labels = {key: " = ".join(sorted(n)) for key, n in names.items()}
    count: dict[str, int] = defaultdict(int)
    for label in labels.values():
        count[label] += 1
    for key, label in labels.items():
        if count[label] > 1:
            tag = key.split(":", 1)[1][:8] if key.startswith("sha256:") else "no content hash"
            labels[key] = f"{label} [{tag}]"
    return labels


def _created(rec: dict) -> tuple[str, float]:
    stamp = rec.get("created_utc", "").rstrip("Z")
    whole, _, frac = stamp.partition(".")
    return whole, float(f"0.{frac}") if frac.isdigit() else 0.0


def _where(rec: dict) -> str:
    return rec.get("_path") or f"run {rec['run_id']}"


def dedupe_records(records: list[dict]) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """Drop repeated runs and repeated seeds (see the module docstring).

    Args:
        records: validated records (``_path`` set by ``load_records`` where read from files).

    Returns:
        (kept records in their input order, notes as ``(task, protocol_key, text)``).

    Raises:
        DuplicateRunError: two records with one run id but different content (both named).
    """
    notes: list[tuple[str, str, str]] = []
    by_run: dict[str, dict] = {}
    copies: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        first = by_run.get(rec["run_id"])
        if first is None:
            by_run[rec["run_id"]] = rec
        elif record_hash(first) != record_hash(rec):
            raise DuplicateRunError(
                f"{_where(rec)}: run id {rec['run_id']!r} is also the run id of {_where(first)}, but the "
                "two records differ (a copied and edited record?); keep one of them"
            )
        else:
            copies[rec["run_id"]].append(rec)
    for run_id, extra in copies.items():
        rec = by_run[run_id]
        where = ", ".join(_where(r) for r in [rec, *extra])
        notes.append((rec["task"], _pkey(rec), f"run {run_id} was read {1 + len(extra)} times ({where}); "
                                               "counted once"))
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in by_run.values():
        key = (model_name_key(rec)[1], rec["task"], _pkey(rec), dataset_key(rec), tuple(sorted(rec["seeds"])))
        groups[key].append(rec)
    keep = set()
    for (_, task, pkey, _, seeds), recs in groups.items():
        newest = max(recs, key=_created)
        keep.add(id(newest))
        if len(recs) > 1:
            others = "; ".join(_where(r) for r in recs if r is not newest)
            seed_text = f"seed(s) {', '.join(map(str, seeds))}" if seeds else "no seed"
            notes.append((task, pkey, f"{model_name_key(newest)[0]}: {len(recs)} runs with {seed_text} are "
                                      f"one seed, not {len(recs)}: only the newest ({_where(newest)}) is "
                                      f"used; ignored: {others}"))
    return [r for r in by_run.values() if id(r) in keep], notes


def _pkey(rec: dict) -> str:
    return protocol_key(rec["protocol"]["kind"], rec["protocol"].get("protocol_id"))
