"""Project imports sit at a module's top; one inside a function says why, in one fixed form.

An import of the project's own code (``sapiens2``, ``evaluators``, ``leaderboard``, ``benchmarks``
or a relative one) inside a function hides what a module depends on and when it fails. The two
accepted reasons, as a comment on the import's line or the line above it:

- ``# optional: PACKAGE``: the imported module needs PACKAGE when it is imported, and PACKAGE is an
  optional dependency (an extra of pyproject.toml, or the MediaPipe requirements file that
  ``scripts/install_mediapipe.sh`` installs beside them);
- ``# cycle: WHY``: at the top it would close an import loop that cannot be broken.

The command line keeps its start fast with a dispatch table (``benchmarks/cli/commands.py``), not
with imports inside functions.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sapiens2", "evaluators", "leaderboard", "benchmarks")
REASON = re.compile(r"#\s*(optional|cycle):\s*(\S.*?)\s*$")

def _requirement_name(line: str) -> str:
    """The distribution name of a requirement line, normalised (``mmcv-lite>=2.1`` -> ``mmcv_lite``)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#")[0])
    return name[1].lower().replace("-", "_").replace(".", "_") if name else ""


def optional_packages(root: Path = ROOT) -> set[str]:
    """The optional dependencies: every extra of pyproject.toml and the MediaPipe requirements file."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11 (tomllib)")
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {_requirement_name(r) for reqs in extras.values() for r in reqs}
    mediapipe = root / "scripts" / "requirements-mediapipe.txt"
    if mediapipe.is_file():
        names |= {_requirement_name(line) for line in mediapipe.read_text().splitlines()}
    return names - {""}


def _is_project_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in PACKAGES
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] in PACKAGES for a in node.names)


def inner_imports(path: Path) -> list[tuple[ast.stmt, str | None, str]]:
    """Every project import inside a function of ``path``: (node, reason kind or None, reason text)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and _is_project_import(child):
                own = lines[child.lineno - 1: child.end_lineno]
                above = [lines[child.lineno - 2]] if child.lineno >= 2 else []
                match = next((m for line in [*own, *above] if (m := REASON.search(line))), None)
                found.append((child, *(match.groups() if match else (None, ""))))
            opens = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or opens)

    visit(ast.parse(text, str(path)), False)
    return found


def project_inner_imports(root: Path = ROOT):
    """``(relative path, node, kind, why)`` of every in-function project import under ``root``."""
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node, kind, why in inner_imports(path):
                yield rel, node, kind, why


def problems(root: Path = ROOT) -> list[str]:
    """``file:line: why`` for each in-function project import without a valid reason."""
    out, optional = [], None
    for rel, node, kind, why in project_inner_imports(root):
        where = f"{rel}:{node.lineno}: {ast.unparse(node)}"
        if kind is None:
            out.append(f"{where}: inside a function without '# optional: PACKAGE' or "
                       "'# cycle: WHY' (move it to the module's top)")
        elif kind == "optional" and _requirement_name(why) not in (
                optional := optional if optional is not None else optional_packages(root)):
            out.append(f"{where}: '# optional: {why}' names no optional dependency of "
                       f"pyproject.toml (known: {', '.join(sorted(optional))})")
    return out


def test_every_in_function_project_import_says_why():
    bad = problems()
    assert not bad, "\n".join(bad)


def false_optional_claims(root: Path = ROOT) -> list[str]:
    """``file:line: why`` for each ``# optional: PACKAGE`` import whose module imports without PACKAGE
    (checked in a child interpreter in which importing PACKAGE fails)."""
    out = []
    for rel, node, kind, why in project_inner_imports(root):
        if kind != "optional":
            continue
        where = f"{rel}:{node.lineno}"
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            out.append(f"{where}: write an optional import as 'from package.module import name'")
            continue
        blocked = why.split()[0]
        code = (f"import sys; sys.modules[{blocked!r}] = None\ntry:\n    import {node.module}\n"
                "except ImportError:\n    sys.exit(0)\nsys.exit(1)\n")
        proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
        if proc.returncode != 0:
            out.append(f"{where}: {node.module} imports without {blocked}, so the import needs no "
                       f"reason (move it to the top){proc.stderr.strip()[-300:]}")
    return out


def test_each_optional_reason_is_true():
    bad = false_optional_claims()
    assert not bad, "\n".join(bad)


def _empty_packages(root: Path) -> None:
    """The project's packages as empty folders under ``root`` (a tree to plant imports in)."""
    for package in PACKAGES:
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")


def test_a_false_optional_claim_is_caught(tmp_path):
    _empty_packages(tmp_path)
    (tmp_path / "sapiens2" / "needs.py").write_text("import json\n")  # needs no optional package
    (tmp_path / "sapiens2" / "uses.py").write_text(
        "def f():\n    from sapiens2.needs import json  # optional: anny\n    return json\n")
    bad = false_optional_claims(tmp_path)
    assert len(bad) == 1 and bad[0].startswith("sapiens2/uses.py:2: sapiens2.needs imports without anny"), bad
    (tmp_path / "sapiens2" / "needs.py").write_text("import anny\n")  # now it does
    assert false_optional_claims(tmp_path) == []


def test_the_scanner_catches_a_planted_import(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project.optional-dependencies]\nrealistic = ["anny>=0.6"]\n')
    _empty_packages(tmp_path)
    (tmp_path / "sapiens2" / "a.py").write_text(
        "import os\n\n"
        "def f():\n    import json\n    from sapiens2 import b\n    return os, json, b\n\n"  # line 5: caught
        "def g():\n    # optional: anny\n    from .b import h\n    return h\n\n"  # a valid reason
        "def k():\n    from .b import h  # optional: mitsuba\n    return h\n\n"  # not an extra here
        "def m():\n    return lambda: [__import__('sapiens2')]\n"  # not an import statement
        "class C:\n    def n(self):\n        from evaluators import x  # cycle: planted\n        return x\n")
    bad = problems(tmp_path)
    assert len(bad) == 2, bad
    assert bad[0].startswith("sapiens2/a.py:5: from sapiens2 import b: inside a function")
    assert bad[1].startswith("sapiens2/a.py:14: from .b import h: '# optional: mitsuba' names no optional")


def test_the_optional_packages_are_read_from_pyproject():
    optional = optional_packages()
    assert {"anny", "mitsuba", "xtcocotools", "mediapipe"} <= optional
    assert "torch" not in optional and "numpy" not in optional
