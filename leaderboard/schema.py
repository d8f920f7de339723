"""The versioned JSON schema of a result record, and a small validator for it.

A result record is one evaluation of one model on one task, dataset and protocol. The schema is
written as a JSON-Schema-like dict (``RESULT_SCHEMA``) so that it can be exported and read by other
tools (``sapiens2-bench leaderboard schema``); ``validate`` checks the subset of JSON Schema used
here (type, const, enum, required, properties, additionalProperties, items, minimum, minLength,
pattern) plus the rules a schema cannot express (probe records need a protocol id, the config hash
must match the config, one seed per single-seed record).

Bump ``SCHEMA_VERSION`` on any incompatible change and keep reading the older versions that
``SUPPORTED_VERSIONS`` lists.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

SCHEMA_ID = "sapiens2-bench/result"
SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)
TASKS = ("pose", "seg", "normal", "pointmap", "albedo")
PROTOCOL_KINDS = ("eval", "probe")

_NUM_OR_NULL = {"type": ["number", "null"]}
_STR = {"type": "string", "minLength": 1}
_OPT_STR = {"type": ["string", "null"]}
_HEX64 = {"type": "string", "pattern": r"^[0-9a-f]{64}$"}

RESULT_SCHEMA: dict[str, Any] = {
    "$id": SCHEMA_ID,
    "title": "sapiens2-bench result record",
    "type": "object",
    "required": [
        "schema", "schema_version", "run_id", "created_utc", "model", "task", "dataset", "protocol",
        "metrics", "conventions", "config", "config_hash", "seeds", "provenance", "device", "timings",
    ],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "schema_version": {"type": "integer", "enum": list(SUPPORTED_VERSIONS)},
        "run_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$"},
        "created_utc": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"},
        "model": {
            "type": "object",
            "required": ["name", "params"],
            "additionalProperties": False,
            "properties": {
                "name": _STR,
                "backbone": _OPT_STR,
                "params": {"type": ["integer", "null"], "minimum": 0},
                "weights": _OPT_STR,
                "checkpoint": {
                    "type": ["object", "null"],
                    "required": ["path"],
                    "additionalProperties": False,
                    "properties": {"path": _STR, "sha256": {"type": ["string", "null"]}},
                },
            },
        },
        "task": {"type": "string", "enum": list(TASKS)},
        "dataset": {
            "type": "object",
            "required": ["name", "split", "content_hash"],
            "additionalProperties": False,
            "properties": {
                "name": _STR,
                "split": _STR,
                "content_hash": {"type": ["string", "null"]},
                "num_samples": {"type": ["integer", "null"], "minimum": 0},
                "root": _OPT_STR,
            },
        },
        "protocol": {
            "type": "object",
            "required": ["kind"],
            "additionalProperties": False,
            "properties": {
                "kind": {"type": "string", "enum": list(PROTOCOL_KINDS)},
                "protocol_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$"},
                "description": _OPT_STR,
            },
        },
        "metrics": {"type": "object", "additionalProperties": _NUM_OR_NULL},
        "metrics_std": {"type": "object", "additionalProperties": _NUM_OR_NULL},
        "breakdowns": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": _NUM_OR_NULL},
        },
        "conventions": {"type": "object"},
        "config": {"type": "object"},
        "config_hash": _HEX64,
        "seeds": {"type": "array", "items": {"type": "integer"}},
        "provenance": {
            "type": "object",
            "required": ["package", "package_version", "git_commit", "python", "torch_version"],
            "properties": {
                "package": _STR,
                "package_version": _STR,
                "git_commit": _OPT_STR,
                "git_dirty": {"type": ["boolean", "null"]},
                "python": _STR,
                "torch_version": _OPT_STR,
                "numpy_version": _OPT_STR,
                "platform": _OPT_STR,
                "command": {"type": ["array", "null"], "items": {"type": "string"}},
            },
        },
        "device": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": _STR, "name": _OPT_STR, "num_threads": {"type": ["integer", "null"]}},
        },
        "timings": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
        "notes": _OPT_STR,
    },
}

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _check(value: Any, schema: dict, where: str, errors: list[str]) -> None:
    """Append to ``errors`` every way ``value`` breaks ``schema`` (JSON-Schema subset)."""
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: expected {schema['const']!r}, got {value!r}")
        return
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in types):
            errors.append(f"{where}: expected {' or '.join(types)}, got {type(value).__name__}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: empty string")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{where}: {value[:80]!r} does not match {schema['pattern']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{where}: non-finite number {value} (store NaN/Inf as null)")
        elif "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} < minimum {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing required field {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, sub in value.items():
            path = f"{where}.{key}"
            if key in props:
                _check(sub, props[key], path, errors)
            elif extra is False:
                errors.append(f"{where}: unexpected field {key!r}")
            elif isinstance(extra, dict):
                _check(sub, extra, path, errors)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{where}[{i}]", errors)


def config_hash(config: dict) -> str:
    """SHA-256 of the canonical JSON of ``config`` (sorted keys, no whitespace)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate(record: Any) -> list[str]:
    """Check a result record against ``RESULT_SCHEMA`` and the cross-field rules.

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
    if version not in SUPPORTED_VERSIONS:
        return [f"record: unsupported schema_version {version!r} (this version reads {SUPPORTED_VERSIONS})"]
    errors: list[str] = []
    _check(record, RESULT_SCHEMA, "record", errors)
    if errors:
        return errors
    protocol = record["protocol"]
    if protocol["kind"] == "probe" and not protocol.get("protocol_id"):
        errors.append("record.protocol: a probe result needs its protocol_id")
    if config_hash(record["config"]) != record["config_hash"]:
        errors.append("record.config_hash: does not match the SHA-256 of record.config (edited config?)")
    if not record["metrics"]:
        errors.append("record.metrics: no metric values")
    std = record.get("metrics_std")
    if std is not None:
        if len(record["seeds"]) < 2:
            errors.append("record.metrics_std: given for a single-seed record")
        missing = set(std) - set(record["metrics"])
        if missing:
            errors.append(f"record.metrics_std: keys without a metric value: {sorted(missing)}")
    if len(set(record["seeds"])) != len(record["seeds"]):
        errors.append("record.seeds: repeated seed")
    return errors
