"""The tables of the docs that are generated from the code, and the check that they are current.

A generated table sits between two HTML comments in a Markdown file::

    <!-- generated: protocol-ids (python -m benchmarks.docs_tables --write) -->
    | ... |
    <!-- end generated: protocol-ids -->

``python -m benchmarks.docs_tables --write`` rewrites every such block from the code;
``python -m benchmarks.docs_tables`` (and ``tests/benchmarks/test_docs_tables.py``) fails, naming the file and
the block, when a block differs from what the code gives, so a changed id fails a test until the
docs say it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"


def protocol_ids_table() -> str:
    """Each named protocol's id per task (``ProbeProtocol.protocol_id``)."""
    from benchmarks.probe import protocol as proto

    makers = [("`default_protocol()` (the main job, `probe`)", proto.default_protocol),
              ("`quick_protocol()` (`--quick`)", proto.quick_protocol),
              ("`body_protocol()` (`--protocol body`: the trained body)", proto.body_protocol)]
    tasks = list(makers[0][1]().tasks)
    lines = ["| protocol | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
    for label, make in makers:
        ids = make().protocol_ids()
        lines.append(f"| {label} | " + " | ".join(f"`{ids[t]}`" for t in tasks) + " |")
    return "\n".join(lines)


def results_index_table() -> str:
    """One row per measurement file under ``benchmarks/results/``: what, when, which commit."""
    from benchmarks.results import read_measurement

    lines = ["| file | what | date | commit |", "|---|---|---|---|"]
    for path in sorted(RESULTS_DIR.rglob("*.json")):
        rec = read_measurement(path)
        rel = path.relative_to(RESULTS_DIR).as_posix()
        commit = rec["commit"] + (" (documented)" if rec.get("commit_is") == "documented" else "")
        lines.append(f"| [`{rel}`]({rel}) | {rec['name']} | {rec['date']} | {commit} |")
    return "\n".join(lines)


def main_job_backbones() -> str:
    """The main job's default backbones and those of ``--quick``."""
    from benchmarks.mainjob import DEFAULT_BACKBONES, QUICK_BACKBONES

    def names(backbones):
        return ", ".join(f"`{b}`" for b in backbones)

    return (f"- `sapiens2-bench run`: {names(DEFAULT_BACKBONES)}\n"
            f"- `sapiens2-bench run --quick`: {names(QUICK_BACKBONES)}")


# block name -> (file holding it, the function that makes its content)
BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "protocol-ids": (ROOT / "docs" / "probing.md", protocol_ids_table),
    "results-index": (RESULTS_DIR / "README.md", results_index_table),
    "main-job-backbones": (ROOT / "docs" / "leaderboard.md", main_job_backbones),
}


def _pattern(name: str) -> re.Pattern:
    key = re.escape(name)
    return re.compile(rf"(<!-- generated: {key}\b[^\n]*-->\n)(.*?)(<!-- end generated: {key} -->)", re.DOTALL)


def current_block(name: str) -> str:
    """The text of block ``name`` as it stands in its file (a missing block is an error)."""
    path, _ = BLOCKS[name]
    m = _pattern(name).search(path.read_text(encoding="utf-8"))
    if m is None:
        raise ValueError(f"{path}: no generated block {name!r} "
                         f"(<!-- generated: {name} ... --> ... <!-- end generated: {name} -->)")
    return m.group(2)


def expected_block(name: str) -> str:
    """What the code gives for block ``name`` (with its trailing newline)."""
    return BLOCKS[name][1]().rstrip("\n") + "\n"


def write_block(name: str) -> bool:
    """Rewrite block ``name`` from the code; return whether the file changed."""
    path, _ = BLOCKS[name]
    text = path.read_text(encoding="utf-8")
    current_block(name)  # raises, naming the file, when the markers are missing
    new = _pattern(name).sub(lambda m: m.group(1) + expected_block(name) + m.group(3), text, count=1)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def stale_blocks() -> list[str]:
    """The names of the blocks whose text differs from what the code gives."""
    return [name for name in BLOCKS if current_block(name) != expected_block(name)]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the generated blocks from the code")
    args = ap.parse_args(argv)
    if args.write:
        for name in BLOCKS:
            changed = write_block(name)
            print(f"{_shown(BLOCKS[name][0])}: {name} {'rewritten' if changed else 'unchanged'}")
        return 0
    stale = stale_blocks()
    for name in stale:
        print(f"{_shown(BLOCKS[name][0])}: generated block {name!r} is out of date; "
              "run python -m benchmarks.docs_tables --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
