"""Wall time of short ``sapiens2-bench`` command lines (``--help`` and friends), each in a fresh process.

Each command line runs ``--repeats`` times as ``python -m benchmarks.cli.main ARGS`` with the code of
``--root`` (default: this checkout) first on ``PYTHONPATH``; the median and the spread of the wall
times are printed and, with ``--json``, written as a measurement file. ``--root`` lets one run time
another checkout (e.g. the commit before a change) with this script. ``--every-command`` adds
``CMD --help`` for every command of the dispatch table (``benchmarks/cli/commands.py``, this
checkout's: the names are the same at the commits compared).

Usage:
    .venv/bin/python benchmarks/speed/cli_startup.py --repeats 5 --every-command \
        --json benchmarks/results/cli/cli_startup.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from benchmarks.cli.commands import COMMANDS
from benchmarks.results import start_measurement, write_measurement

# What a user types first: the overview, one command's help, and the torch-free pose evaluation's help.
COMMAND_LINES = ("--help", "--version", "eval --help", "eval pose --help", "probe --help", "run --help")
# The parser with every command module imported: what the overview would cost without the dispatch
# table of benchmarks/cli/commands.py (timed with --every-module, on code that has the table).
EVERY_MODULE = "from benchmarks.cli.main import build_parser; build_parser()"


def time_command(root: Path, args: list[str], repeats: int) -> dict:
    """Median, min and max wall seconds of ``repeats`` fresh runs of ``sapiens2-bench ARGS``
    (``python -c CODE`` when ``args`` is ``["-c", CODE]``).

    Raises:
        RuntimeError: the command exited non-zero (names the command line and its stderr's last line).
    """
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, *(args if args[0] == "-c" else ["-m", "benchmarks.cli.main", *args])]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            raise RuntimeError(f"sapiens2-bench {' '.join(args)} exited {proc.returncode}: {last}")
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "max_s": round(max(times), 3), "repeats": repeats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                    help="checkout whose code is timed (default: this one)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--label", default="",
                    help="what --root holds, kept in the file (its part before ':' ends the name)")
    ap.add_argument("--every-module", action="store_true",
                    help="also time build_parser() with every command module imported")
    ap.add_argument("--every-command", action="store_true",
                    help="also time CMD --help for every command of the dispatch table")
    ap.add_argument("--json", default=None, help="write the numbers here (a measurement file)")
    args = ap.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: must be at least 1")
    started = start_measurement()
    rows = {}
    lines = {line: line.split() for line in COMMAND_LINES}
    if args.every_command:
        lines.update({f"{name} --help": [name, "--help"] for name in COMMANDS})
    if args.every_module:
        lines["build_parser() with every command module"] = ["-c", EVERY_MODULE]
    for line, argv in lines.items():
        rows[line] = time_command(args.root.resolve(), argv, args.repeats)
        print(f"{line:<42} median {rows[line]['median_s']:.3f} s "
              f"(min {rows[line]['min_s']:.3f}, max {rows[line]['max_s']:.3f})", flush=True)
    if args.json:
        numbers = {"root": args.label or str(args.root), "commands": rows}
        notes = "fresh process per run; includes the Python interpreter's own start"
        if args.root.resolve() != Path(__file__).resolve().parents[2]:
            notes += f"; the timed code is --root ({numbers['root']}), not the commit named above"
        name = "sapiens2-bench start-up wall time" + (f" ({args.label.split(':')[0]})" if args.label else "")
        path = write_measurement(args.json, name, numbers, started=started, notes=notes)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
