"""The subcommands of ``sapiens2-bench``: name -> the module that defines it and its one-line help.

A dispatch table rather than imports: :func:`benchmarks.cli.main.build_parser` imports (with
:mod:`importlib`) only the module of the command being run, since each command module imports what
its command runs (torch, the probe, the data stack) at its top: importing them all takes seconds,
while ``sapiens2-bench --help`` lists every command from this table alone in about 0.1 s
(``benchmarks/results/cli/startup_after.json``). Each module's ``register(subparsers)`` takes its help
line from here, so the overview and the command agree.
"""

from __future__ import annotations

# In the order shown by --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("benchmarks.cli.run", "main job: probe default backbones on synthetic data, build the report"),
    "compare": ("benchmarks.cli.compare", "paired bootstrap comparison of two backbones' probe records"),
    "parity": ("benchmarks.cli.parity", "check parity with the official implementation on a golden set"),
    "model-card": ("benchmarks.cli.model_card",
                   "recompute the model card (params, FLOPs) of every official arch"),
    "predict": ("benchmarks.cli.predict",
                "run a task model on images and write the predictions and pictures"),
    "convert": ("benchmarks.cli.convert",
                "convert checkpoints between the official and the transformers layout"),
    "eval": ("benchmarks.cli.eval", "evaluate prediction files against ground truth"),
    "data": ("benchmarks.cli.data", "make synthetic data, show a split's ground truth"),
    "probe": ("benchmarks.cli.probe", "probe a frozen backbone on the five dense tasks"),
    "pretrain": ("benchmarks.cli.pretrain",
                 "pretrain a Sapiens2 backbone (MAE + [CLS] self-distillation + KoLeo)"),
    "leaderboard": ("benchmarks.cli.leaderboard", "build leaderboard reports from result records"),
    "download": ("benchmarks.cli.download",
                 "fetch official checkpoints from the Hugging Face Hub into the reproduce layout"),
    "reproduce": ("benchmarks.cli.reproduce", "reproduce a table of the Sapiens2 paper"),
    "system": ("benchmarks.cli.system", "evaluate an off-the-shelf pretrained reference system (mediapipe)"),
}


def command_help(name: str) -> str:
    """The one-line help of command ``name`` (a ``KeyError`` naming it for a command not in the table).

    Example:
        >>> command_help("eval")
        'evaluate prediction files against ground truth'
    """
    if name not in COMMANDS:
        raise KeyError(f"sapiens2-bench has no command {name!r} in benchmarks.cli.commands.COMMANDS")
    return COMMANDS[name][1]
