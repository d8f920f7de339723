"""A plug-in backbone whose own code fails at import (sys.exit, NameError, SyntaxError) is named as the
plug-in's error with exit 1, never a silent exit 0 or a traceback blamed on sapiens2-bench."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main

BODIES = {
    "plug_exit": ("import sys\nsys.exit(0)\n", r"called sys.exit\(0\) while being imported"),
    "plug_name": ("x = undefined_name\n", "NameError: name 'undefined_name' is not defined"),
    "plug_syntax": ("def broken(:\n", "SyntaxError"),
    "plug_missing_dep": ("import no_such_dependency_xyz\n", "ModuleNotFoundError: No module named"),
}


def _probe(tmp_path, *args) -> int:
    return main(["probe", *args, "--tasks", "seg", "--data", str(tmp_path / "never_read"),
                 "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("module", sorted(BODIES))
def test_a_plugin_failing_at_import_is_named(module, tmp_path, monkeypatch, capsys):
    body, why = BODIES[module]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{module}.py").write_text(body)
    monkeypatch.syspath_prepend(str(plugins))
    assert _probe(tmp_path, "--backbone", f"{module}:Thing") == 1
    err = capsys.readouterr().err
    assert f"the plug-in module '{module}' failed to import" in err and "error in the plug-in's code" in err
    import re

    assert re.search(why, err), err
    assert "most likely a bug in sapiens2-bench" not in err and not (tmp_path / "o").exists()


def test_an_included_file_calling_sys_exit_is_named(tmp_path, capsys):
    path = tmp_path / "plug_exit_include.py"
    path.write_text("import sys\nsys.exit(0)\n")
    assert _probe(tmp_path, "--include", str(path), "--backbone", "pixels") == 1
    err = capsys.readouterr().err
    assert f"--include {path}" in err and "sys.exit(0)" in err
