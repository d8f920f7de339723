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
from sapiens2.records.view import Record, RecordView


class DuplicateRunError(ValueError):
    """Two different records that carry the same run id."""


def model_name_key(rec: Record) -> tuple[str, str]:
    """(display name, matching key) of a record's model; random-init models never match the published one."""
    model = RecordView.of(rec).model
    name, key = model.name, canonical_model_key(model.name)
    if model.random_init:
        name, key = f"{name} (random init)", f"{key}@random"
    return name, key


def dataset_key(rec: Record) -> str:
    """The identity of a record's dataset: its content hash, or ``name/split`` when it has none."""
    return RecordView.of(rec).dataset.key


def dataset_labels(records: list[Record]) -> dict[str, str]:
    """A display label per dataset key, distinct for distinct keys.

    Returns:
        ``{dataset_key: label}``; the label is ``name/split`` (names of one content joined by
        `` = ``), with ``[<8 hex>]`` appended where one label would stand for several contents.
    """
    names: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        ds = RecordView.of(rec).dataset
        names[ds.key].add(ds.label)
    labels = {key: " = ".join(sorted(n)) for key, n in names.items()}
    count: dict[str, int] = defaultdict(int)
    for label in labels.values():
        count[label] += 1
    for key, label in labels.items():
        if count[label] > 1:
            tag = key.split(":", 1)[1][:8] if key.startswith("sha256:") else "no content hash"
            labels[key] = f"{label} [{tag}]"
    return labels


def _created(rec: RecordView) -> tuple[str, float]:
    stamp = rec.created_utc.rstrip("Z")
    whole, _, frac = stamp.partition(".")
    return whole, float(f"0.{frac}") if frac.isdigit() else 0.0


def dedupe_records(records: list[Record]) -> tuple[list[Record], list[tuple[str, str, str]]]:
    """Drop repeated runs and repeated seeds (see the module docstring): the leaderboard's one de-duplication.

    Args:
        records: validated records or their views (``_path`` set by ``load_records`` where read from files).

    Returns:
        (kept records, the given objects in their input order; notes as ``(task, protocol_key, text)``).

    Raises:
        DuplicateRunError: two records with one run id but different content (both named).
    """
    notes: list[tuple[str, str, str]] = []
    views = [(r, RecordView.of(r)) for r in records]
    by_run: dict[str, tuple[Record, RecordView]] = {}
    copies: dict[str, list[RecordView]] = defaultdict(list)
    for rec, view in views:
        first = by_run.get(view.run_id)
        if first is None:
            by_run[view.run_id] = (rec, view)
        elif first[1].content_hash() != view.content_hash():
            raise DuplicateRunError(
                f"{view.where}: run id {view.run_id!r} is also the run id of {first[1].where}, but the "
                "two records differ (a copied and edited record?); keep one of them"
            )
        else:
            copies[view.run_id].append(view)
    for run_id, extra in copies.items():
        view = by_run[run_id][1]
        where = ", ".join(v.where for v in [view, *extra])
        notes.append((view.task, view.protocol.key,
                      f"run {run_id} was read {1 + len(extra)} times ({where}); counted once"))
    groups: dict[tuple, list[RecordView]] = defaultdict(list)
    for _, view in by_run.values():
        key = (model_name_key(view)[1], view.task, view.protocol.key, view.dataset.key,
               tuple(sorted(view.seeds)))
        groups[key].append(view)
    keep = set()
    for (_, task, pkey, _, seeds), views_ in groups.items():
        newest = max(views_, key=_created)
        keep.add(id(newest))
        if len(views_) > 1:
            others = "; ".join(v.where for v in views_ if v is not newest)
            seed_text = f"seed(s) {', '.join(map(str, seeds))}" if seeds else "no seed"
            notes.append((task, pkey, f"{model_name_key(newest)[0]}: {len(views_)} runs with {seed_text} are "
                                      f"one seed, not {len(views_)}: only the newest ({newest.where}) is "
                                      f"used; ignored: {others}"))
    return [rec for rec, view in by_run.values() if id(view) in keep], notes
