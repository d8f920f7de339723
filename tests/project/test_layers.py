"""The top-level packages form one-way layers: benchmarks -> leaderboard -> evaluators -> sapiens2.

Every import counts (module level and inside functions), and so does a module path written in a
string (registry ``locations``, ``"pkg.mod:func"`` dispatch), since those import at run time too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Lower index = lower layer; a package may import only packages below it (and itself).
LAYERS = ["sapiens2", "evaluators", "leaderboard", "benchmarks"]
_STRING_MODULE = re.compile("^(" + "|".join(LAYERS) + r")(\.[A-Za-z_]\w*)+(:\w+)?$")


def _imported_packages(path: Path) -> list[tuple[str, int]]:
    """(top-level package, line) of every import and module-path string in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _STRING_MODULE.match(node.value.strip()):
                found.append((node.value.split(".")[0], node.lineno))
    return [(pkg, line) for pkg, line in found if pkg in LAYERS]


def _violations(package: str) -> list[str]:
    allowed = set(LAYERS[: LAYERS.index(package) + 1])
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for pkg, line in _imported_packages(path):
            if pkg not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {pkg}")
    return bad


@pytest.mark.parametrize("package", LAYERS)
def test_package_imports_only_lower_layers(package):
    assert (ROOT / package / "__init__.py").is_file()
    bad = _violations(package)
    assert not bad, f"{package} may import only {LAYERS[: LAYERS.index(package) + 1]}:\n" + "\n".join(bad)


def test_checker_sees_function_level_imports_and_strings(tmp_path):
    """The check itself catches an in-function import and a registry-location string."""
    mod = tmp_path / "mod.py"
    mod.write_text('def f():\n    import benchmarks.cli\n\nLOC = ["leaderboard.results"]\n')
    assert sorted(p for p, _ in _imported_packages(mod)) == ["benchmarks", "leaderboard"]
