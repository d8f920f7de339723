"""Record integrity: canonical hashes, the probe protocol id formula, and the checks that use them.

A result record carries two hashes, both SHA-256 over canonical JSON (sorted keys, no whitespace):

- ``config_hash`` over ``config``;
- ``record_hash`` (schema version 2) over every field of the record except ``record_hash`` itself
  (metrics, config, provenance, model, task, dataset, protocol, seeds, ...), so that any edit made
  after the record was written is detected when it is read.

A probe's ``protocol_id`` is derived from the protocol dict stored in ``config["protocol"]``
(:func:`protocol_id`); it is recomputed on read, so a record cannot be moved to another protocol's
table by editing its id. A record stores its own task's protocol (``ProbeProtocol.task_protocol``:
``tasks`` holds that task alone), so the id it carries is its task's. Records whose protocol version
is at most :data:`LAST_WHOLE_PROTOCOL_VERSION` may store the whole protocol of every task, hashed as
one: they are checked against what they store, so published records stay readable.

These checks catch accidents (a hand edit, a merge gone wrong, a file copied over another); they
are no defence against an attacker, who can recompute the hashes with this very code.

Example:
    >>> protocol_id("probe", 3, {"version": 3, "lr": 0.001})
    'probe-v3-a2eb760fd23b'
    >>> canonical_json({"b": 1, "a": [1.5, None]})
    b'{"a":[1.5,null],"b":1}'
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

RECORD_HASH_FIELD = "record_hash"
# the last probe protocol version whose records may store (and hash) the protocol of every task; its
# records are read as they were written (the id is checked against whatever protocol they store)
LAST_WHOLE_PROTOCOL_VERSION = 4
_PROBE_ID = re.compile(r"^probe-v(\d+)-[0-9a-f]{12}$")


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON of ``obj``: sorted keys, separators ``(",", ":")``, ASCII escapes, NaN refused.

    Args:
        obj: a JSON-ready value.

    Returns:
        The encoded bytes.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def protocol_id(kind_prefix: str, version: int, protocol: dict) -> str:
    """``<kind_prefix>-v<version>-`` + the first 12 hex digits of SHA-256 over the protocol's canonical JSON.

    The one formula for probe protocol ids: ``ProbeProtocol.protocol_id(task)`` calls it, and record
    validation calls it again on the protocol dict a record stores.

    Args:
        kind_prefix: ``"probe"``.
        version: the protocol version.
        protocol: the protocol as a plain JSON dict (``ProbeProtocol.to_dict()``).

    Returns:
        The id, e.g. ``probe-v3-0123456789ab``.
    """
    digest = hashlib.sha256(
        json.dumps(protocol, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return f"{kind_prefix}-v{version}-{digest[:12]}"


def record_hash(record: dict) -> str:
    """SHA-256 over the canonical JSON of ``record`` without ``record_hash`` and private ``_`` keys.

    Args:
        record: a result record (as made by ``make_record`` or read from JSON).

    Returns:
        The hex digest.
    """
    body = {k: v for k, v in record.items() if k != RECORD_HASH_FIELD and not k.startswith("_")}
    return hashlib.sha256(canonical_json(body)).hexdigest()


def check_protocol_id(record: dict) -> list[str]:
    """Problems with a record's protocol id: a probe id must match ``config["protocol"]`` and kind ``probe``.

    Ids of the probe form (``probe-v<N>-<12 hex>``) are recomputed from the protocol dict the
    record stores; other ids (task-model protocols, external probes) cannot be derived from the
    record and are protected by ``record_hash`` alone.

    Args:
        record: a record that passed the schema.

    Returns:
        Human-readable problems (empty when consistent).
    """
    proto = record["protocol"]
    pid = proto.get("protocol_id")
    if not pid:
        return []
    m = _PROBE_ID.match(pid)
    if pid.startswith("probe-") and not m:
        return [f"record.protocol.protocol_id: {pid!r} looks like a probe id but is not of the form "
                "probe-v<version>-<12 hex digits>"]
    if not m:
        return []
    problems = []
    if proto["kind"] != "probe":
        problems.append(f"record.protocol.kind: {proto['kind']!r}, but {pid!r} is a probe protocol id "
                        "(edited kind?)")
    stored = record["config"].get("protocol")
    if not isinstance(stored, dict):
        problems.append(f"record.config.protocol: missing, so probe protocol id {pid!r} cannot be verified")
        return problems
    version = stored.get("version")
    if str(version) != m.group(1):
        problems.append(f"record.protocol.protocol_id: {pid!r} names version {m.group(1)} but "
                        f"config.protocol.version is {version!r}")
        return problems
    tasks = stored.get("tasks")
    own = not isinstance(tasks, dict) or list(tasks) == [record["task"]]
    if int(version) > LAST_WHOLE_PROTOCOL_VERSION and not own:
        problems.append(f"record.config.protocol.tasks: {sorted(tasks)}, but a {record['task']} record "
                        f"of protocol v{version} stores its own task's protocol alone")
        return problems
    expected = protocol_id("probe", version, stored)
    if expected != pid:
        problems.append(f"record.protocol.protocol_id: {pid!r} does not match config.protocol "
                        f"(which hashes to {expected!r}; edited id or protocol?)")
    return problems
