"""The subcommands of ``sapiens2-bench``: name -> its parser module, its handler module and its help line.

A dispatch table rather than imports. Each command is two modules:

- the parser module (``benchmarks.cli.parsers.NAME``) defines ``register(subparsers)``: the command's
  arguments and help text. It imports no torch, numpy or data stack, so that ``sapiens2-bench NAME
  --help`` and an argument error answer at once;
- the handler module (``benchmarks.cli.NAME``) holds what the command runs (``run(args)`` and its
  helpers) and imports what that needs at its top.

:func:`benchmarks.cli.main.build_parser` imports (with :mod:`importlib`) only the parser module of the
command being run; the parser sets ``func`` to a :class:`Handler`, which imports the handler module
when the command runs (``benchmarks/results/cli/command_help_after.json``). Each parser takes its help line
from here, so the overview and the command agree.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NamedTuple


class Command(NamedTuple):
    """One row of :data:`COMMANDS`."""

    parser: str  # module with register(subparsers); imports nothing heavy
    handler: str  # module with the functions the command runs
    help: str  # the one-line help of the overview


def _command(module: str, help_text: str) -> Command:
    return Command(f"benchmarks.cli.parsers.{module}", f"benchmarks.cli.{module}", help_text)


# In the order shown by --help.
COMMANDS: dict[str, Command] = {
    "run": _command("run", "main job: probe default backbones on synthetic data, build the report"),
    "compare": _command("compare", "paired bootstrap comparison of two backbones' probe records"),
    "parity": _command("parity", "check parity with the official implementation on a golden set"),
    "model-card": _command("model_card", "recompute the model card (params, FLOPs) of every official arch"),
    "predict": _command("predict", "run a task model on images and write the predictions and pictures"),
    "convert": _command("convert", "convert checkpoints between the official and the transformers layout"),
    "eval": _command("eval", "evaluate prediction files against ground truth"),
    "data": _command("data", "make synthetic data, show a split's ground truth"),
    "probe": _command("probe", "probe a frozen backbone on the five dense tasks"),
    "pretrain": _command("pretrain", "pretrain a Sapiens2 backbone (MAE + [CLS] self-distillation + KoLeo)"),
    "leaderboard": _command("leaderboard", "build leaderboard reports from result records"),
    "download": _command("download",
                         "fetch official checkpoints from the Hugging Face Hub into the reproduce layout"),
    "reproduce": _command("reproduce", "reproduce a table of the Sapiens2 paper"),
    "system": _command("system", "evaluate an off-the-shelf pretrained reference system (mediapipe)"),
}


def _entry(name: str) -> Command:
    if name not in COMMANDS:
        raise KeyError(f"sapiens2-bench has no command {name!r} in benchmarks.cli.commands.COMMANDS")
    return COMMANDS[name]


def command_help(name: str) -> str:
    """The one-line help of command ``name`` (a ``KeyError`` naming it for a command not in the table).

    Example:
        >>> command_help("eval")
        'evaluate prediction files against ground truth'
    """
    return _entry(name).help


class Handler:
    """A function of a command's handler module, imported when the command runs.

    A parser sets it as ``func`` (``p.set_defaults(func=handler("probe"))``); calling it with the parsed
    namespace imports the module and calls the function it holds then (so a test that replaces
    ``benchmarks.cli.probe.run`` is heard).

    Example:
        >>> handler("data", "run_show")
        Handler('benchmarks.cli.data:run_show')
    """

    def __init__(self, module: str, function: str):
        self.module, self.function = module, function

    def resolve(self):
        """The function itself (imports the handler module).

        Raises:
            AttributeError: the handler module has no such function (a bug of the table or the parser).
        """
        module = importlib.import_module(self.module)
        func = getattr(module, self.function, None)
        if not callable(func):
            raise AttributeError(f"{self.module} has no function {self.function!r}, which a parser of "
                                 "benchmarks/cli/parsers names as its handler")
        return func

    def __call__(self, args: argparse.Namespace) -> int | None:
        return self.resolve()(args)

    def __repr__(self) -> str:
        return f"Handler('{self.module}:{self.function}')"


def handler(name: str, function: str = "run") -> Handler:
    """The :class:`Handler` of ``function`` in command ``name``'s handler module."""
    return Handler(_entry(name).handler, function)
