"""Worker of the rank-agreement test: under torchrun, rank r runs ``sapiens2-bench probe`` with its own
``--data`` and ``--tasks`` (argv: OUT DATA0 TASKS0 DATA1 TASKS1), as a misconfigured launcher would."""

from __future__ import annotations

import os
import sys

from benchmarks.cli.main import main

if __name__ == "__main__":
    out, data0, tasks0, data1, tasks1 = sys.argv[1:6]
    rank = int(os.environ.get("RANK", "0"))
    data, tasks = (data0, tasks0) if rank == 0 else (data1, tasks1)
    argv = ["probe", "--backbone", "gt-oracle", "--quick", "--data", data, "--tasks", tasks, "--out", out]
    sys.exit(main(argv))
