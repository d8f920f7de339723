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
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SCHEMA = "sapiens2-bench/measurement-1"
REQUIRED_FIELDS = ("schema", "name", "command", "commit", "machine", "date", "load", "numbers")
_REPO_ROOT = Path(__file__).resolve().parents[2]


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


def machine_description() -> str:
    """The machine in one line: CPU model, logical CPUs, OS, Python and torch when loaded."""
    parts = [
        _cpu_model(),
        f"{os.cpu_count()} logical CPUs",
        f"{platform.system()} {platform.release()}",
        f"Python {platform.python_version()}",
    ]
    torch = sys.modules.get("torch")
    if torch is not None:
        parts.append(f"torch {torch.__version__}")
        if torch.cuda.is_available():
            parts.append(torch.cuda.get_device_name(0))
    return ", ".join(parts)


def git_commit(root: Path = _REPO_ROOT) -> str:
    """The short commit hash of ``root``, with ``-dirty`` when tracked files changed; ``unknown``
    outside a git checkout (an installed package)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


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
    record = {
        "schema": SCHEMA,
        "name": name,
        "command": command or shlex.join([Path(sys.executable).name, *sys.argv]),
        "commit": git_commit(),
        "commit_is": "measured",
        "machine": machine_description(),
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
