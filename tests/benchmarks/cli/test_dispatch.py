"""The command table (benchmarks/cli/commands.py): the overview imports no command module, a command
imports only its own, every command's parser (its --help and argument errors) imports no torch, every
handler a parser names exists, and the table's help lines are the commands' own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli.commands import COMMANDS, Handler, command_help, handler
from benchmarks.cli.main import _all_parsers, _subparsers, build_parser, chosen_command

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(argv: list[str]) -> tuple[int, set[str]]:
    """Exit code of ``sapiens2-bench ARGV`` in a child interpreter and the CLI, torch and numpy modules it
    had imported by then."""
    code = ("import sys\nfrom benchmarks.cli.main import main\ntry:\n    code = main(sys.argv[1:])\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print('MODULES', *(m for m in sys.modules\n"
            "                   if m.startswith(('benchmarks.cli.', 'torch', 'numpy'))))\n"
            "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MODULES"))
    return proc.returncode, set(line.split()[1:])


def test_the_overview_imports_no_command_module_and_no_torch():
    code, modules = _modules_after(["--help"])
    assert code == 0
    assert modules == {"benchmarks.cli.main", "benchmarks.cli.commands", "benchmarks.cli.examples"}, modules


def test_a_command_imports_its_own_modules_only():
    code, modules = _modules_after(["leaderboard", "schema"])
    assert code == 0
    commands = {m for m in modules if m in {module for entry in COMMANDS.values() for module in entry[:2]}}
    # the leaderboard command's parser and handler modules, and none of the others' (they are not run)
    assert commands == {"benchmarks.cli.parsers.leaderboard", "benchmarks.cli.leaderboard"}, commands


SHORT_ANSWERS = [[name, "--help"] for name in COMMANDS] + [
    ["eval", "pose", "--help"], ["data", "synth", "--help"], ["reproduce", "table4", "--help"],
    ["probe", "--workers", "two"], ["run", "--no-such-flag"],
]


@pytest.mark.parametrize("argv", SHORT_ANSWERS, ids=" ".join)
def test_a_command_help_or_argument_error_imports_no_torch_and_no_handler(argv):
    """``sapiens2-bench CMD --help`` (and an argument error) builds the command's parser only: neither
    torch, numpy nor the command's handler module is imported, so the answer does not wait for them."""
    code, modules = _modules_after(argv)
    assert code == (0 if "--help" in argv else 2)
    assert not {m for m in modules if m.split(".")[0] in ("torch", "numpy")}, argv
    handlers = {entry.handler for entry in COMMANDS.values()}
    assert not modules & handlers, modules & handlers


def test_every_parser_names_a_handler_that_exists():
    """Each (sub)command's ``func`` is a Handler of its own command's handler module, and the function it
    names is there (so a renamed function cannot leave a command that fails only when run)."""
    named = []
    for p in _all_parsers(build_parser()):
        func = p.get_default("func")
        if isinstance(func, Handler):
            command = p.prog.split()[1]
            assert func.module == COMMANDS[command].handler, (p.prog, func)
            assert callable(func.resolve()), (p.prog, func)
            named.append(p.prog)
    leaves = [p.prog for p in _all_parsers(build_parser()) if _subparsers(p) is None]
    assert sorted(named) == sorted(leaves)


def test_a_handler_calls_the_function_its_module_holds_when_called(monkeypatch):
    """The function is looked up at call time: replacing it in the handler module is heard."""
    seen = []
    monkeypatch.setattr("benchmarks.cli.compare.run", lambda args: seen.append(args) or 7)
    assert handler("compare")("ARGS") == 7 and seen == ["ARGS"]
    with pytest.raises(AttributeError, match="benchmarks.cli.compare has no function 'nothing'"):
        handler("compare", "nothing")("ARGS")


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
