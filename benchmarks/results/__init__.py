"""Measurements as data: one JSON file per measurement (speed, memory, validity, ablation).

The files live in this folder, one sub-folder per area (``probe/``, ``evaluators/``, ...), named
``<date>_<what>.json``; the docs link to them instead of quoting dated numbers in prose. The scripts
under ``benchmarks/speed/`` and ``benchmarks/analysis/`` write their ``--json`` output in this format
through :func:`write_measurement`, which fills in the command, commit, machine, date and load.
"""

from benchmarks.results.measurement import (
    REQUIRED_FIELDS,
    SCHEMA,
    MeasurementError,
    read_measurement,
    start_measurement,
    write_measurement,
)

__all__ = [
    "REQUIRED_FIELDS",
    "SCHEMA",
    "MeasurementError",
    "read_measurement",
    "start_measurement",
    "write_measurement",
]
