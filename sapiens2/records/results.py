"""Result records: build them with full provenance, write them atomically, read them back validated.

A record answers "which model, on which data, under which protocol, gave which numbers, made by which
code on which machine". Example::

    rec = make_record(model="sapiens2_0.1b", task="seg", dataset={"name": "synth", "split": "test",
                      "content_hash": dataset_content_hash(root)}, protocol={"kind": "probe",
                      "protocol_id": pid}, metrics=evaluator.compute(), config=cfg, seeds=[0],
                      timings={"train_s": 12.3})
    write_record("results/seg.json", rec)
    rec = read_record("results/seg.json")
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sapiens2.records.declared import remember
from sapiens2.records.integrity import RECORD_HASH_FIELD, record_hash
from sapiens2.records.provenance import dataset_content_hash, device_info, provenance
from sapiens2.records.schema import SCHEMA_ID, SCHEMA_MINOR, SCHEMA_VERSION, config_hash, validate
from sapiens2.utils_io import read_json, write_json_atomic

RESULT_SUFFIX = ".json"
__all__ = ["RESULT_SUFFIX", "RecordError", "UnusableResultsError", "dataset_content_hash", "device_info",
           "find_result_files", "flatten_metrics", "load_records", "make_record", "provenance", "read_record",
           "write_record"]


class RecordError(ValueError):
    """A results file that is not a valid sapiens2-bench result record."""

    def __init__(self, path: str | os.PathLike | None, problems: list[str]):
        self.path = None if path is None else str(path)
        self.problems = problems
        where = self.path or "<record>"
        shown = "; ".join(problems[:8]) + (f"; ... ({len(problems) - 8} more)" if len(problems) > 8 else "")
        super().__init__(f"{where}: invalid result record: {shown}")


class UnusableResultsError(RecordError):
    """Several result files that cannot be used; the message names every one and why."""

    def __init__(self, problems: list[str]):
        ValueError.__init__(self, f"{len(problems)} result files cannot be used:\n  " + "\n  ".join(problems))
        self.path, self.problems = None, problems


def _clean_number(x: Any, name: str = "metric") -> float | None:
    if x is None:
        return None
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, str) or not isinstance(x, (int, float)):
        raise ValueError(f"{name}: expected a number, got {type(x).__name__} {x!r:.60}")
    x = float(x)
    return x if math.isfinite(x) else None


def flatten_metrics(metrics: Mapping[str, Any], sep: str = "/") -> tuple[dict, dict]:
    """Split an evaluator output into flat metrics and per-item breakdowns.

    Scalars stay metrics; a nested dict of scalars ``{"wholebody": {"AP": ..}}`` becomes
    ``"wholebody/AP"``; a ``"conventions"`` entry is skipped (it goes to the record's conventions);
    a ``"summary"`` mapping is merged into the top level. A mapping under a key starting with
    ``per_`` (e.g. ``per_class: {"IoU": {"Hair": ..}}`` or ``{"IoU": [per class id]}``) is a
    breakdown named ``"IoU per class"``.

    Returns:
        (metrics, breakdowns) ready for ``make_record``.
    """
    flat: dict[str, float | None] = {}
    breakdowns: dict[str, dict[str, float | None]] = {}
    if isinstance(metrics.get("summary"), Mapping):  # {"summary": {...}, "per_class": {...}} layout
        metrics = {**{k: v for k, v in metrics.items() if k != "summary"}, **metrics["summary"]}
    for key, value in metrics.items():
        if key == "conventions":
            continue
        if isinstance(value, Mapping):
            if key.startswith("per_"):
                for stat, items in value.items():
                    if isinstance(items, (list, tuple)):
                        items = {str(i): v for i, v in enumerate(items)}
                    if not isinstance(items, Mapping):
                        raise ValueError(f"metrics[{key!r}][{stat!r}]: expected a mapping item -> value")
                    where = f"metrics[{key!r}][{stat!r}]"
                    breakdowns[f"{stat} {key.replace('_', ' ')}"] = {
                        str(k): _clean_number(v, f"{where}[{k!r}]") for k, v in items.items()
                    }
                continue
            for sub, v in value.items():
                if isinstance(v, Mapping):
                    raise ValueError(f"metrics[{key!r}][{sub!r}]: nested too deep for a flat metric")
                flat[f"{key}{sep}{sub}"] = _clean_number(v, f"metrics[{key!r}][{sub!r}]")
        elif isinstance(value, (list, tuple)):
            raise ValueError(f"metrics[{key!r}]: a list is not a metric value; use a per_* mapping")
        else:
            flat[str(key)] = _clean_number(value, f"metrics[{key!r}]")
    return flat, breakdowns


def make_record(
    *,
    model: str | Mapping[str, Any],
    task: str,
    dataset: Mapping[str, Any],
    protocol: Mapping[str, Any],
    metrics: Mapping[str, Any],
    config: Mapping[str, Any],
    seeds: Iterable[int] = (),
    conventions: Mapping[str, Any] | None = None,
    breakdowns: Mapping[str, Mapping[str, Any]] | None = None,
    metrics_std: Mapping[str, Any] | None = None,
    intervals: Mapping[str, Any] | None = None,
    timings: Mapping[str, float] | None = None,
    device: Any = "cpu",
    params: int | None = None,
    run_id: str | None = None,
    notes: str | None = None,
    command: list[str] | None = None,
    metric_decls: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict:
    """Build a validated result record with provenance filled in.

    Args:
        model: model name, or a dict with ``name`` and optional ``backbone``, ``params``, ``weights``,
            ``checkpoint`` ({"path", "sha256"}).
        task: one of ``pose, seg, normal, pointmap, albedo``.
        dataset: ``{"name", "split", "content_hash"}`` (+ optional ``num_samples``, ``root``).
        protocol: ``{"kind": "eval"}`` for a task model or ``{"kind": "probe", "protocol_id": ...}``.
        metrics: metric values under the official names; evaluator output is accepted as is (nested
            parts are flattened, ``conventions`` is taken from it when ``conventions`` is not given).
        config: the full configuration that produced the result (hashed into ``config_hash``).
        seeds: seed(s); more than one means the metrics are a mean over seeds (give ``metrics_std``).
        conventions: metric conventions (pooling, NaN policy, alignment solver, ...).
        breakdowns: per-class / per-part tables ``{name: {item: value}}``.
        metrics_std: standard deviation over seeds for aggregated records.
        intervals: confidence intervals, ``{"level": 0.95, "method": "bootstrap" | "seeds",
            "resamples": 1000, "seed": 0, "n": <test images>, "bounds": {metric: [low, high]}}``.
        timings: durations in seconds (e.g. ``{"features_s": .., "train_s": .., "eval_s": ..}``).
        device: torch device (or its name) the result was computed on.
        params: parameter count when ``model`` is a plain name.
        run_id: explicit id; a fresh one (UTC time + random suffix) otherwise.
        notes: free text.
        command: the command line; ``sys.argv`` by default.
        metric_decls: what each metric means, ``{key: {"label", "higher_is_better", "unit", "scale",
            "interval", "headline", ...}}`` (``evaluators.metric_decl.record_declarations``), so readers
            without the task's code can show and rank it.

    Returns:
        The record (a JSON-ready dict), sealed with ``record_hash`` over all its other fields: edit
        nothing after this call (build a new record instead).

    Raises:
        RecordError: the record would not validate; the message lists every problem.
    """
    model_dict = {"name": model} if isinstance(model, str) else dict(model)
    if params is not None:
        model_dict["params"] = int(params)
    model_dict.setdefault("params", None)
    flat, nested_breakdowns = flatten_metrics(metrics)
    all_breakdowns = {**nested_breakdowns, **{k: {str(i): _clean_number(v) for i, v in d.items()}
                                              for k, d in (breakdowns or {}).items()}}
    if conventions is None:
        conventions = metrics.get("conventions", {}) if isinstance(metrics, Mapping) else {}
    now = _dt.datetime.now(_dt.timezone.utc)
    config = _jsonable(dict(config))
    record: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "schema_minor": SCHEMA_MINOR,
        "run_id": run_id or f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        "created_utc": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "model": _jsonable(model_dict),
        "task": task,
        "dataset": _jsonable(dict(dataset)),
        "protocol": _jsonable(dict(protocol)),
        "metrics": flat,
        "conventions": _jsonable(dict(conventions)),
        "config": config,
        "config_hash": config_hash(config),
        "seeds": [int(s) for s in seeds],
        "provenance": provenance(command),
        "device": device_info(device),
        "timings": {k: float(v) for k, v in (timings or {}).items()},
    }
    if all_breakdowns:
        record["breakdowns"] = all_breakdowns
    if metrics_std is not None:
        record["metrics_std"] = flatten_metrics(metrics_std)[0]
    if intervals is not None:
        record["intervals"] = _jsonable(dict(intervals))
    if notes:
        record["notes"] = notes
    if metric_decls:
        record["metric_decls"] = _jsonable(dict(metric_decls))
    try:
        record[RECORD_HASH_FIELD] = record_hash(record)
    except (TypeError, ValueError) as e:
        raise RecordError(None, [f"record: not plain JSON ({e})"]) from e
    problems = validate(record)
    if problems:
        raise RecordError(None, problems)
    return record


def _jsonable(obj: Any) -> Any:
    """Convert tuples, paths, numpy/torch scalars and non-finite floats to plain JSON values."""
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "item") and callable(obj.item):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate ``record`` and write it atomically to ``path`` (parent folders are created).

    Raises:
        RecordError: naming ``path`` and every problem; nothing is written.
    """
    problems = validate(record)
    if problems:
        raise RecordError(path, problems)
    return write_json_atomic(path, record)


def read_record(path: str | os.PathLike) -> dict:
    """Read and validate one result record.

    Raises:
        FileNotFoundError: no such file.
        RecordError: malformed JSON, a foreign file or an invalid record; the message names the path
            and the reasons.
    """
    try:
        record = read_json(path)
    except ValueError as e:
        raise RecordError(path, [str(e).split(": ", 1)[-1]]) from e
    problems = validate(record)
    if problems:
        raise RecordError(path, problems)
    remember(record)  # its metric declarations: what a reader without the task's code goes by
    return record


def find_result_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Expand files and folders (searched recursively for ``*.json``) into a file list.

    A file reached twice (a folder passed twice, a file passed and inside a passed folder, a link)
    is listed once, at its first position.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(f for f in p.rglob(f"*{RESULT_SUFFIX}") if f.is_file())
        elif p.is_file():
            found = [p]
        else:
            raise FileNotFoundError(f"{p}: no such results file or folder")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                files.append(f)
    return files


def load_records(
    paths: Iterable[str | os.PathLike],
    skip_foreign: bool = False,
    skipped: list[str] | None = None,
) -> list[dict]:
    """Read every result record under ``paths``; each file is read once however often it is reached.

    Args:
        paths: result files and/or folders.
        skip_foreign: in folders, skip JSON files that are valid JSON but not sapiens2-bench results
            (no ``schema`` field), e.g. a probe's resume state. Files named explicitly and invalid
            sapiens2-bench records are always errors.
        skipped: when given, unreadable files (truncated or malformed JSON, unreadable bytes,
            permission denied) and invalid records are appended to it as ``"path: reason"`` and
            left out; otherwise they are an error.

    Returns:
        Records, each with its source file under the private key ``"_path"``.

    Raises:
        RecordError: one or more unreadable or invalid files (every one is named), unless
            ``skipped`` is given.
    """
    paths = list(paths)
    records = []
    problems: list[str] = []
    errors: list[Exception] = []
    explicit = {Path(p).resolve() for p in paths if Path(p).is_file()}
    for f in find_result_files(paths):
        try:
            rec = read_record(f)
        except RecordError as e:
            if skip_foreign and f.resolve() not in explicit and _is_foreign(f):
                continue
            problems.append(str(e))
            errors.append(e)
            continue
        except (OSError, UnicodeDecodeError) as e:
            err = RecordError(f, [f"unreadable result file ({type(e).__name__}: {e})"])
            problems.append(str(err))
            errors.append(err)
            continue
        rec["_path"] = str(f)
        records.append(rec)
    if problems:
        if skipped is None:
            if len(errors) == 1:
                raise errors[0]
            raise UnusableResultsError(problems)
        skipped.extend(problems)
    return records


def _is_foreign(path: Path) -> bool:
    """True for a well-formed JSON file that does not claim to be a sapiens2-bench result."""
    try:
        obj = read_json(path)
    except (OSError, ValueError):
        return False  # unreadable or truncated: reported, never silently skipped
    return not (isinstance(obj, dict) and obj.get("schema") == SCHEMA_ID)
