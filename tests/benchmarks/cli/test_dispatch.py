"""The command table (benchmarks/cli/commands.py): the overview imports no command module, a command
imports only its own, and the table's help lines are the commands' own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli.commands import COMMANDS, command_help
from benchmarks.cli.main import _subparsers, build_parser, chosen_command

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(argv: list[str]) -> tuple[int, set[str]]:
    """Exit code of ``sapiens2-bench ARGV`` in a child interpreter and the project and torch modules it
    had imported by then."""
    code = ("import sys\nfrom benchmarks.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print('MODULES', *(m for m in sys.modules if m.startswith(('benchmarks.cli.', 'torch'))))\n"
            "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MODULES"))
    return proc.returncode, set(line.split()[1:])


def test_the_overview_imports_no_command_module_and_no_torch():
    code, modules = _modules_after(["--help"])
    assert code == 0
    assert modules == {"benchmarks.cli.main", "benchmarks.cli.commands", "benchmarks.cli.examples"}, modules


def test_a_command_imports_its_own_module_only():
    code, modules = _modules_after(["leaderboard", "schema"])
    assert code == 0
    commands = {m for m in modules if m in {module for module, _ in COMMANDS.values()}}
    # the leaderboard command's module, and none of the others' (they are not run)
    assert commands == {"benchmarks.cli.leaderboard"}, commands


def test_the_table_names_every_command_with_its_own_help_line():
    parser = build_parser()
    choices = _subparsers(parser)
    assert list(choices.choices) == list(COMMANDS)
    shown = {a.dest: a.help for a in choices._choices_actions}
    assert shown == {name: command_help(name) for name in COMMANDS}
    light = _subparsers(build_parser([]))
    assert {a.dest: a.help for a in light._choices_actions} == shown


def test_chosen_command_skips_options_and_the_include_value():
    assert chosen_command(["--include", "eval", "probe"]) == "probe"
    assert chosen_command(["--inc", "eval", "--debug", "run", "--quick"]) == "run"
    assert chosen_command(["--include=eval", "data", "synth"]) == "data"
    assert chosen_command(["--debug", "--", "run"]) == "run"
    assert chosen_command(["--"]) is None
    assert chosen_command([]) is None


def test_an_unknown_command_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser([]).parse_args(["probee"])
    assert e.value.code == 2 and "invalid choice: 'probee'" in capsys.readouterr().err
    with pytest.raises(KeyError, match="no command 'probee'"):
        command_help("probee")
