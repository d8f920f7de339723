"""The CLI only parses and calls: nothing outside ``benchmarks/cli/`` imports it, and the main job is a
library function (``benchmarks.mainjob.run_main_job``) that the ``run`` subcommand calls."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib
from _probe_toy import make_toy_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("sapiens2", "evaluators", "leaderboard", "benchmarks")
CLI = "benchmarks.cli"
ENTRY_POINT = "benchmarks.cli.main"  # the console script; run as ``python -m benchmarks.cli.main`` too
# Tools that document the CLI itself (not library code any command runs): they may read its parser.
CLI_READERS = {"benchmarks/docs_tables.py": "renders the subcommands' options into the docs' option tables",
               "benchmarks/speed/cli_startup.py": "times each command of the dispatch table (its --help)"}


def _is_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


def cli_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of the CLI, and every CLI module path in a string, in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_cli(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_cli(node.module):
                found.append((node.lineno, node.module))
            elif node.module == "benchmarks" and any(a.name == "cli" for a in node.names):
                found.append((node.lineno, CLI))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip().split(":")[0]
            if _is_cli(text) and text != ENTRY_POINT:  # ``-m benchmarks.cli.main`` runs the entry point
                found.append((node.lineno, text))
    return found


def test_nothing_outside_the_cli_imports_it():
    bad = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("benchmarks/cli/") or rel in CLI_READERS:
                continue
            bad += [f"{rel}:{line} imports {mod}" for line, mod in cli_imports(path)]
    assert not bad, "library code may not import the CLI (move the helper to a library module):\n" + \
        "\n".join(bad)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"sapiens2-bench": f"{ENTRY_POINT}:main"}


def test_the_scan_sees_every_form(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("import benchmarks.cli.run\nfrom benchmarks.cli.probe import default_data_dir\n"
                   "from benchmarks import cli\ndef f():\n    from benchmarks.cli import model_card\n"
                   "X = 'benchmarks.cli.leaderboard:known_protocol_names'\n"
                   "Y = ['-m', 'benchmarks.cli.main']\n")  # running the entry point is allowed
    found = [m for _, m in sorted(cli_imports(mod))]
    assert found == ["benchmarks.cli.run", "benchmarks.cli.probe", "benchmarks.cli", "benchmarks.cli",
                     "benchmarks.cli.leaderboard"]


@pytest.mark.slow
def test_main_job_is_a_library_function(tmp_path, capsys):
    """run_main_job end to end on toy data (no CLI): records, the report, the paired comparison."""
    from benchmarks.mainjob import MainJobResult, run_main_job

    data = make_toy_data(tasks=("seg",), seed=0)
    job = run_main_job(tmp_path / "o", quick=True, backbones=["gt-oracle", "pixels"], tasks="seg", data=data,
                       compare=[("gt-oracle", "pixels")], include_paper=False, mediapipe=False)
    lines = capsys.readouterr().out.splitlines()
    assert isinstance(job, MainJobResult) and job.exit_code == 0 and not job.failed
    assert sorted(p.parent.parent.parent.name for p in job.records_dir.rglob("seed0.json")) == \
        ["gt-oracle", "pixels"]
    assert job.site["html"].is_file() and job.comparisons_file.is_file()
    assert [(c["a"], c["b"], c["task"]) for c in job.comparisons] == [("gt-oracle", "pixels", "seg")]
    assert lines[0].startswith("[1/3] data: using") and any(x.startswith("[3/3]") for x in lines)


def test_main_job_refuses_bad_pairs_and_weights_before_any_work(tmp_path):
    from benchmarks.mainjob import run_main_job

    with pytest.raises(ValueError, match="not pairs of two different backbones"):
        run_main_job(tmp_path, quick=True, backbones=["pixels"], compare=[("pixels", "gt-oracle")])
    with pytest.raises(ValueError, match="none given"):
        run_main_job(tmp_path, backbones=[])
    with pytest.raises(ValueError, match="backbones not in the run"):
        run_main_job(tmp_path, quick=True, backbones=["pixels"], weights={"other": "x"})
    assert not any(tmp_path.iterdir())
