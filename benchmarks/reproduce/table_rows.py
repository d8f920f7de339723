"""Which paper tables ``reproduce`` knows and the rows each has: its task, the model sizes, the input.

Plain constants, importable without torch or the model stack, so that the command line can list the
tables and describe each in its help (:mod:`benchmarks.reproduce.table_help`) without importing what
evaluates them (:mod:`benchmarks.reproduce.tables`, which uses and re-exports these).

Example:
    >>> table_sizes("seg"), table_sizes("pose")
    (('0.4b', '0.8b', '1b', '5b', '1b-4k'), ('0.4b', '0.8b', '1b', '5b'))
"""

from __future__ import annotations

TABLES = ("table1", "table2", "table3", "table4", "table5", "table6", "table7")
TABLE_TASKS = {"table3": "pose", "table4": "seg", "table5": "pointmap", "table6": "normal",
               "table7": "albedo"}
SIZES = ("0.4b", "0.8b", "1b", "5b")
SIZE_4K = "1b-4k"
TASKS_4K = ("seg", "normal")  # the paper's 1B-4K rows: Table 4 and Table 6
OFFICIAL_INPUT = (1024, 768)
INPUT_4K = (4096, 3072)


def table_sizes(task: str) -> tuple[str, ...]:
    """The sizes a task table has rows for (the 1B-4K rows only for seg and normal)."""
    return SIZES + ((SIZE_4K,) if task in TASKS_4K else ())
