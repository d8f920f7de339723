"""The versioned JSON Schema of a result record, and the validator built on it.

A result record is one evaluation of one model on one task, dataset and protocol. Its schema is
published as a JSON Schema (draft 2020-12) file, ``sapiens2/records/result.schema.json``, so that other
tools can check our records with any JSON Schema library (``sapiens2-bench leaderboard schema``
prints it). ``validate`` checks a record with the ``jsonschema`` library and then the rules JSON
Schema cannot express: the config hash and the record hash match the content, a probe protocol
id matches the protocol stored in the config (:mod:`sapiens2.records.integrity`), numbers are finite,
``metrics_std`` and the optional ``intervals.bounds`` have no key without a metric, and every
interval has ``low <= high`` (an interval need not contain the metric's value: a bootstrap
percentile interval of a skewed statistic may not).

Bump ``SCHEMA_VERSION`` on any incompatible change and keep reading the older versions that
``SUPPORTED_VERSIONS`` lists (version 1 records have no ``record_hash``; edits to them other than
to ``config`` cannot be detected).

The file names no task: a record's ``task`` is checked against the task table when it is
validated (so a task registered by a plug-in is valid), or, for a task whose code is not loaded,
the record must declare its metrics (``metric_decls``, :mod:`sapiens2.records.declared`); and
:func:`result_schema` is the file with the registered tasks as the field's enum (what
``sapiens2-bench leaderboard schema`` publishes).

Example:
    >>> result_schema()["properties"]["task"]["enum"]
    ['pose', 'seg', 'normal', 'pointmap', 'albedo']
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from sapiens2.records.declared import decl_problems, record_decls
from sapiens2.records.integrity import RECORD_HASH_FIELD, canonical_json, check_protocol_id, record_hash
from sapiens2.tasks import task_names

SCHEMA_ID = "sapiens2-bench/result"
SCHEMA_VERSION = 2
# the minor version records are written with (``schema_minor``; absent: 0): a minor version only adds
# optional fields, so the records of every older minor version of SCHEMA_VERSION still read. 1: metric_decls
SCHEMA_MINOR = 1
SUPPORTED_VERSIONS = (1, 2)
SCHEMA_FILE = Path(__file__).with_name("result.schema.json")
PROTOCOL_KINDS = ("eval", "probe")


def _load_schema() -> dict[str, Any]:
    with open(SCHEMA_FILE, encoding="utf-8") as f:
        return json.load(f)


RESULT_SCHEMA: dict[str, Any] = _load_schema()


def result_schema() -> dict[str, Any]:
    """The published schema: the file with the task table's tasks (as now registered) as ``task``'s enum."""
    schema = json.loads(json.dumps(RESULT_SCHEMA))
    schema["properties"]["task"]["enum"] = list(task_names())
    return schema


@lru_cache(maxsize=1)
def _validator():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(RESULT_SCHEMA)
    return Draft202012Validator(RESULT_SCHEMA)


def _where(path) -> str:
    return "record" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _type_names(types) -> str:
    return " or ".join([types] if isinstance(types, str) else types)


def _messages(error) -> list[str]:
    """Our wording of one ``jsonschema`` error (``x-messages`` in the schema override it)."""
    where, kind = _where(error.absolute_path), error.validator
    inst, val = error.instance, error.validator_value
    custom = (error.schema.get("x-messages") or {}).get(kind) if isinstance(error.schema, dict) else None
    if custom:
        return [f"{where}: {custom}"]
    if kind == "required":
        return [f"{where}: missing required field {k!r}" for k in val
                if isinstance(inst, dict) and k not in inst]
    if kind == "additionalProperties":
        known = error.schema.get("properties", {})
        return [f"{where}: unexpected field {k!r}" for k in inst if k not in known]
    if kind == "type":
        return [f"{where}: expected {_type_names(val)}, got {type(inst).__name__}"]
    if kind == "enum":
        return [f"{where}: {inst!r} is not one of {val}"]
    if kind == "const":
        return [f"{where}: expected {val!r}, got {inst!r}"]
    if kind == "minimum":
        return [f"{where}: {inst} < minimum {val}"]
    if kind == "minLength":
        return [f"{where}: empty string"]
    if kind == "pattern":
        return [f"{where}: {str(inst)[:80]!r} does not match {val}"]
    return [f"{where}: {error.message}"]


def _non_finite(value: Any, where: str, out: list[str]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        out.append(f"{where}: non-finite number {value} (store NaN/Inf as null)")
    elif isinstance(value, dict):
        for k, v in value.items():
            _non_finite(v, f"{where}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _non_finite(v, f"{where}[{i}]", out)


def config_hash(config: dict) -> str:
    """SHA-256 of the canonical JSON of ``config`` (sorted keys, no whitespace)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def schema_problems(record: Any) -> list[str]:
    """Every way ``record`` breaks ``result.schema.json`` (the JSON Schema part of ``validate``)."""
    problems: list[str] = []
    for error in sorted(_validator().iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path]):
        for msg in _messages(error):
            if msg not in problems:
                problems.append(msg)
    return problems


def interval_problems(record: dict) -> list[str]:
    """The checks of the optional ``intervals`` field that JSON Schema cannot express.

    Example:
        >>> interval_problems({"metrics": {"mIoU": 40.0}, "intervals": {"bounds": {"mIoU": [41.0, 39.0],
        ...                                                                          "mAcc": [1.0, 2.0]}}})
        ["record.intervals.bounds: keys without a metric value: ['mAcc']", \
'record.intervals.bounds.mIoU: low 41.0 > high 39.0']
    """
    bounds = (record.get("intervals") or {}).get("bounds") or {}
    problems = []
    missing = set(bounds) - set(record["metrics"])
    if missing:
        problems.append(f"record.intervals.bounds: keys without a metric value: {sorted(missing)}")
    for name, (low, high) in sorted(bounds.items()):
        if low > high:
            problems.append(f"record.intervals.bounds.{name}: low {low} > high {high}")
    return problems


def validate(record: Any) -> list[str]:
    """Check a result record against ``result.schema.json`` and the rules a schema cannot express.

    Args:
        record: the decoded JSON object.

    Returns:
        A list of human-readable problems; empty when the record is valid.
    """
    if not isinstance(record, dict):
        return [f"record: expected a JSON object, got {type(record).__name__}"]
    if record.get("schema") != SCHEMA_ID:
        return [f"record: not a sapiens2-bench result (field 'schema' is {record.get('schema')!r}, "
                f"expected {SCHEMA_ID!r})"]
    version = record.get("schema_version")
    if version not in SUPPORTED_VERSIONS or isinstance(version, bool):
        return [f"record: unsupported schema_version {version!r} (this version reads {SUPPORTED_VERSIONS})"]
    errors: list[str] = []
    _non_finite(record, "record", errors)
    errors += schema_problems(record)
    if errors:
        return errors
    try:
        canonical_json(record)
    except (TypeError, ValueError) as e:
        return [f"record: not plain JSON ({e})"]
    if config_hash(record["config"]) != record["config_hash"]:
        errors.append("record.config_hash: does not match the SHA-256 of record.config (edited config?)")
    errors += decl_problems(record)
    if record["task"] not in task_names() and not any(d.headline for d in record_decls(record)):
        errors.append(f"record.task: {record['task']!r} is not one of {list(task_names())} (the task table), "
                      "and the record does not declare its metrics (metric_decls with a headline), so "
                      "nothing says what its numbers mean (load the task's plug-in with --include)")
    errors += check_protocol_id(record)
    missing = set(record.get("metrics_std") or {}) - set(record["metrics"])
    if missing:
        errors.append(f"record.metrics_std: keys without a metric value: {sorted(missing)}")
    errors += interval_problems(record)
    if RECORD_HASH_FIELD in record and record_hash(record) != record[RECORD_HASH_FIELD]:
        errors.append(f"record.{RECORD_HASH_FIELD}: does not match the record's content (metrics, config, "
                      "provenance or another field edited after the record was made?)")
    return errors
