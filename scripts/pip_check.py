"""``pip check`` for the bootstrap environment, allowing only the gaps listed in no-deps-gaps.txt.

Usage: ``.venv/bin/python scripts/pip_check.py`` (exit 0 when clean; else prints what is wrong).
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

GAPS_FILE = Path(__file__).with_name("no-deps-gaps.txt")
_LINE = re.compile(r"^(\S+) \S+ (?:requires|has requirement) ([A-Za-z0-9_.\-]+)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def allowed_gaps(path: Path = GAPS_FILE) -> dict[tuple[str, str], str]:
    """``(package, requirement) -> reason`` from the gaps file (normalised names)."""
    gaps = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        parts = body.split()
        if len(parts) != 2 or not reason.strip():
            raise SystemExit(f"{path}:{n}: expected 'PACKAGE REQUIREMENT  # reason', got {line!r}")
        gaps[(_norm(parts[0]), _norm(parts[1]))] = reason.strip()
    return gaps


def unmet_requirements(pip_check_output: str) -> set[tuple[str, str]]:
    """The ``(package, requirement)`` pairs that ``pip check`` reported."""
    found = set()
    for line in pip_check_output.splitlines():
        m = _LINE.match(line.strip())
        if m:
            found.add((_norm(m.group(1)), _norm(m.group(2))))
    return found


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def problems(pip_check_output: str, gaps: dict[tuple[str, str], str]) -> list[str]:
    """What is wrong: unmet requirements not in the list, and listed gaps that are no longer unmet."""
    unmet = unmet_requirements(pip_check_output)
    out = [f"unmet and not in {GAPS_FILE.name}: {pkg} needs {req}" for pkg, req in sorted(unmet - set(gaps))]
    out += [f"listed in {GAPS_FILE.name} but no longer unmet: {pkg} {req} (remove the line)"
            for pkg, req in sorted(set(gaps) - unmet) if _installed(pkg)]
    return out


def main() -> int:
    res = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    wrong = problems(res.stdout + res.stderr, allowed_gaps())
    for line in wrong:
        print(f"pip_check: {line}", file=sys.stderr)
    if not wrong:
        print(f"pip_check: clean apart from the {len(unmet_requirements(res.stdout))} listed --no-deps gaps")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
