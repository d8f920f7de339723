"""Write and read measurement files: the numbers plus where, when and how they were measured.

A measurement file is one JSON object:

- ``schema``: :data:`SCHEMA`;
- ``name``: what was measured, in a few words;
- ``command``: the command line that measured it;
- ``commit``: the git commit of the measured code (``-dirty`` when the tree had changes);
  ``commit_is`` says ``"measured"`` (the code that ran) or ``"documented"`` (a measurement moved
  here from the docs: the commit that first wrote it down, whose parent is the measured code);
- ``machine``: CPU, cores, operating system, Python and, when loaded, torch;
- ``date``: UTC, ISO 8601;
- ``load``: the 1/5/15-minute load average before and after (a shared machine's numbers move with
  it), or the load as written down for a moved measurement;
- ``numbers``: whatever the script measured (any JSON value);
- ``notes``: optional text (caveats, the moved paragraph).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sapiens2.records.provenance import provenance

SCHEMA = "sapiens2-bench/measurement-1"
REQUIRED_FIELDS = ("schema", "name", "command", "commit", "machine", "date", "load", "numbers")


class MeasurementError(ValueError):
    """A measurement file that is not one: names the file and what is wrong."""


def _load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(prov: dict) -> str:
    """The machine in one line: CPU model, logical CPUs, platform, Python, torch (and its GPU, if any)."""
    parts = [_cpu_model(), f"{os.cpu_count()} logical CPUs", prov["platform"], f"Python {prov['python']}",
             f"torch {prov['torch_version']}"]
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        parts.append(torch.cuda.get_device_name(0))
    return ", ".join(parts)


def commit_of(prov: dict) -> str:
    """The commit of the measured code from :func:`sapiens2.records.provenance.provenance`: 12 hex
    digits, ``-dirty`` when tracked files had changes, ``unknown`` outside a git checkout."""
    if not prov["git_commit"]:
        return "unknown"
    return prov["git_commit"][:12] + ("-dirty" if prov["git_dirty"] else "")


def start_measurement() -> dict:
    """Call before measuring: keeps the start time and the load average of that moment."""
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "load_before": _load_average()}


def write_measurement(path, name: str, numbers: Any, *, started: dict | None = None,
                      notes: str = "", command: str | None = None) -> Path:
    """Write one measurement file (atomically) and return its path.

    Args:
        path: the JSON file to write (parent folders are created).
        name: what was measured, in a few words.
        numbers: the measured values (any JSON-serialisable value).
        started: :func:`start_measurement`'s dict from before the measurement (else: now).
        notes: caveats worth keeping with the numbers.
        command: the command line (default: this process's ``sys.argv``).
    """
    started = started or start_measurement()
    prov = provenance()
    record = {
        "schema": SCHEMA,
        "name": name,
        "command": command or shlex.join([Path(sys.executable).name, *prov["command"]]),
        "commit": commit_of(prov),
        "commit_is": "measured",
        "machine": machine_description(prov),
        "date": started["date"],
        "load": {"before": started["load_before"], "after": _load_average()},
        "numbers": numbers,
    }
    if notes:
        record["notes"] = notes
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)
    return path


def read_measurement(path) -> dict:
    """Read a measurement file; a file that is not JSON, or lacks a field, is a
    :class:`MeasurementError` naming the file and the field."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise MeasurementError(f"{path}: not a readable JSON measurement file ({e})") from e
    if not isinstance(record, dict):
        raise MeasurementError(f"{path}: a measurement file holds one JSON object, "
                               f"got {type(record).__name__}")
    missing = [k for k in REQUIRED_FIELDS if k not in record]
    if missing:
        raise MeasurementError(f"{path}: missing field(s) {', '.join(missing)} "
                               f"(a measurement file has {', '.join(REQUIRED_FIELDS)})")
    if record["schema"] != SCHEMA:
        raise MeasurementError(f"{path}: schema {record['schema']!r}, expected {SCHEMA!r}")
    return record
