"""Entry point of ``sapiens2-bench``.

Each subcommand is a parser module that defines ``register(subparsers)`` (its arguments and help;
it imports nothing heavy) and a handler module with what it runs. The parser sets ``func`` (called
with the parsed namespace, returns an exit code) to a :class:`benchmarks.cli.commands.Handler`, which
imports the handler module only when the command runs. Both are named in a dispatch table
(:data:`benchmarks.cli.commands.COMMANDS`) and only the chosen command's parser module is imported,
so the overview (``--help``), a command's own ``--help`` and an argument error answer without
importing torch (``benchmarks/results/cli/command_help_after.json``).

Errors: every expected failure (:class:`sapiens2.errors.BenchError`, any ``OSError`` such as a
missing, read-only or wrong-kind path, ``ValueError``, ``KeyError``, ``RuntimeError``, a missing
package) ends in one line ``sapiens2-bench CMD: error: ...`` and exit code 1. Anything else is a
bug: its traceback is printed with a one-line hint, exit code 1. ``--debug`` (accepted before or
after the subcommand) re-raises, so the full traceback of any error is shown.

Plug-ins (``--include``, before or after the subcommand, and the ``sapiens2_bench.plugins`` entry
points: :mod:`sapiens2.plugins`) are imported before the parser is built, once for every command.

Common options handled here for every command: ``--device`` is resolved by
:func:`sapiens2.device.resolve_device` (``auto``, and a clear error for a device this torch build
cannot use), and a command that cannot split its work across processes refuses to run under
``torchrun`` with ``WORLD_SIZE > 1`` (every worker would repeat the work and write the same files).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Iterable

from benchmarks.cli.commands import COMMANDS
from benchmarks.cli.examples import add_examples
from sapiens2 import __version__
from sapiens2.device import resolve_device
from sapiens2.errors import BenchError
from sapiens2.plugins import include, include_args, load_entry_points

# Commands that split their work across torchrun workers (and write once, from rank 0).
DISTRIBUTED_COMMANDS = ("probe", "pretrain")

# Failures caused by the input, the files or the machine, not by a bug: one message, exit 1.
EXPECTED_ERRORS = (BenchError, OSError, ValueError, KeyError, RuntimeError, ModuleNotFoundError)

_DEBUG_HELP = "show the full traceback of an error (accepted before or after the subcommand)"
_INCLUDE_HELP = ("import this plug-in first: a .py file, a folder of them or a module name (repeatable, "
                 "before or after the subcommand); what it registers (tasks, readers, evaluators, probe "
                 "tasks, backbones) is known to every choice and default of the command")
DEVICE_HELP = "cpu, cuda, cuda:N, mps or auto (CUDA when available), checked before the command runs"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _all_parsers(parser: argparse.ArgumentParser):
    """``parser`` and every (sub)command parser below it, each once."""
    yield parser
    sub = _subparsers(parser)
    if sub is not None:
        for child in {id(p): p for p in sub.choices.values()}.values():
            yield from _all_parsers(child)


def _common_options(parser: argparse.ArgumentParser) -> None:
    """``--debug`` and ``--include`` on every parser; the accepted names in every ``--device`` help; the
    examples.

    ``--debug`` is absent (``SUPPRESS``) unless given, rather than False, so a subcommand's default
    cannot reset a ``--debug`` given before the subcommand name (argparse copies a subparser's
    defaults over the namespace); :func:`main` sets ``args.debug``.
    """
    for p in _all_parsers(parser):
        debug = p._option_string_actions.get("--debug")
        if debug is None:
            p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
        else:
            debug.default = argparse.SUPPRESS
        if "--include" not in p._option_string_actions:  # read from the command line before parsing
            p.add_argument("--include", action="append", default=argparse.SUPPRESS, metavar="PATH_OR_MODULE",
                           help=_INCLUDE_HELP)
        device = p._option_string_actions.get("--device")
        if device is not None:
            device.help = f"{device.help or 'torch device'}; {DEVICE_HELP}"
        add_examples(p, p.prog.removeprefix(parser.prog).strip())


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser.

    Args:
        commands: the commands whose parser modules are imported and whose full parsers are built
            (None: every command, as the docs and tests need); the others are listed by name and
            one-line help only, which is all the overview (``sapiens2-bench --help``) shows.
    """
    parser = argparse.ArgumentParser(
        prog="sapiens2-bench",
        description="Reference benchmark and evaluation suite for Sapiens2.",
    )
    parser.add_argument("--version", action="version", version=f"sapiens2-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, entry in COMMANDS.items():
        if commands is None or name in commands:
            importlib.import_module(entry.parser).register(sub)
        else:
            sub.add_parser(name, help=entry.help)
    _common_options(parser)
    return parser


def chosen_command(argv: list[str]) -> str | None:
    """The command named on a command line: its first word that is neither an option nor the value of
    ``--include`` (the only top-level option that takes one); None when there is none.

    Example:
        >>> chosen_command(["--include", "plugin.py", "--debug", "eval", "pose", "--gt", "g.json"])
        'eval'
        >>> chosen_command(["--help"]) is None
        True
    """
    takes_value = False
    for i, word in enumerate(argv):
        if takes_value:
            takes_value = False
        elif word == "--":  # what follows is positional, the command first
            return argv[i + 1] if i + 1 < len(argv) else None
        elif word.startswith("-"):
            # argparse accepts any unambiguous prefix of a long option (--inc PATH)
            takes_value = "=" not in word and len(word) > 2 and "--include".startswith(word)
        else:
            return word
    return None


def command_name(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The chosen (sub)command path, e.g. ``"data synth"``, for messages."""
    names, p = [], parser
    while (sub := _subparsers(p)) is not None:
        chosen = getattr(args, sub.dest, None)
        if chosen not in sub.choices:
            break
        names.append(chosen)
        p = sub.choices[chosen]
    return " ".join(names)


def refuse_torchrun(command: str, name: str) -> None:
    """Raise when launched with ``WORLD_SIZE > 1`` for a command that does not split its work.

    Raises:
        BenchError: names the world size and the commands that do support torchrun.
    """
    world = os.environ.get("WORLD_SIZE", "").strip()
    if not world or command in DISTRIBUTED_COMMANDS:
        return
    try:
        size = int(world)
    except ValueError as e:
        raise BenchError(f"WORLD_SIZE={world!r} in the environment is not an integer") from e
    if size > 1:
        rank = os.environ.get("RANK", "?")
        raise BenchError(
            f"launched as worker {rank} of WORLD_SIZE={size} (torchrun?), but '{name}' runs in one process: "
            f"every worker would repeat all the work and write the same files. Run it without torchrun; "
            f"only {', '.join(DISTRIBUTED_COMMANDS)} split their work across workers"
        )


def describe_error(e: BaseException) -> str:
    """The one-line message for an expected error (an ``OSError`` names its path).

    Example:
        >>> describe_error(PermissionError(13, "Permission denied", "/data/out.json"))
        'Permission denied: /data/out.json'
        >>> describe_error(KeyError("unknown key 'x'"))
        "unknown key 'x'"
    """
    if isinstance(e, OSError) and not isinstance(e, BenchError) and e.filename is not None:
        path = os.fsdecode(e.filename)
        if e.filename2 is not None:
            path += f" -> {os.fsdecode(e.filename2)}"
        msg = f"{e.strerror or type(e).__name__}: {path}"
        if isinstance(e, NotADirectoryError):
            msg += " (a part of this path is a file, not a folder)"
        return msg
    if isinstance(e, ModuleNotFoundError):
        return f"{e} (a required package is missing; pyproject.toml lists the dependencies and extras)"
    if isinstance(e, KeyError) and not isinstance(e, BenchError) and e.args:
        return str(e.args[0])
    return str(e) or type(e).__name__


def load_plugins(argv: list[str]) -> list[str]:
    """Import the plug-ins of a command line (every ``--include``) and of the installed distributions
    (the ``sapiens2_bench.plugins`` entry points), before any parser exists: a task, reader or backbone
    they register is then in every choice list and default (``probe --tasks``)."""
    return include(include_args(argv)) + load_entry_points()


def main(argv: list[str] | None = None) -> int:
    """Load the plug-ins, parse ``argv`` and run the chosen subcommand; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        load_plugins(argv)
    except EXPECTED_ERRORS as e:
        if "--debug" in argv:
            raise
        first = next((a for a in argv if not a.startswith("-")), "")
        print(f"sapiens2-bench {first}: error: {describe_error(e)}".replace(" :", ":"), file=sys.stderr)
        return 1
    chosen = chosen_command(argv)
    parser = build_parser([chosen] if chosen in COMMANDS else [])
    args = parser.parse_args(argv)
    args.debug = bool(getattr(args, "debug", False))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    name = command_name(parser, args) or str(args.command)
    try:
        refuse_torchrun(args.command, name)
        if isinstance(getattr(args, "device", None), str):
            args.device = resolve_device(args.device)
        code = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as e:
        if args.debug:
            raise
        print(f"sapiens2-bench {name}: error: {describe_error(e)}", file=sys.stderr)
        return 1
    except Exception:
        if args.debug:
            raise
        traceback.print_exc()
        print(f"sapiens2-bench {name}: unexpected error (most likely a bug in sapiens2-bench): please report "
              "it with the traceback above and the command line", file=sys.stderr)
        return 1
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
