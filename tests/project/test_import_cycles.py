"""No two modules of the project import each other, directly or around a loop.

Every import counts, the ones inside functions too: an import moved into a function hides a loop
from Python's import order but not from the reader. Record writers import the record format from
``sapiens2.records``, never through the leaderboard's re-export.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sapiens2", "evaluators", "leaderboard", "benchmarks")


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the project's packages (a name imported from a package's
    ``__init__`` counts as that module when it is one)."""
    modules = _modules(root)

    def owner(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                found.update([base, *(f"{base}.{a.name}" for a in node.names)])
        # a package importing its own submodules is how a package is assembled, not a loop
        graph[name] = {m for m in map(owner, found) if m and m != name and not name.startswith(m + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import loop of ``graph`` ([] when there is none)."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as e:
        return list(e.args[1])
    return []


def test_no_module_imports_itself_around_a_loop():
    cycle = find_cycle(import_graph(ROOT))
    assert not cycle, "import loop: " + " -> ".join(cycle)


def test_the_check_sees_a_loop_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "sapiens2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from sapiens2.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f\n")
    for other in PACKAGES[1:]:
        (tmp_path / other).mkdir()
    assert sorted(set(find_cycle(import_graph(tmp_path)))) == ["sapiens2.a", "sapiens2.b"]


def test_record_writers_import_the_record_format_from_sapiens2():
    users = [str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py")
             if "leaderboard.results" in p.read_text(encoding="utf-8")]
    assert not users, f"import sapiens2.records, not its leaderboard re-export: {users}"
