"""``sapiens2-bench pretrain``: the Sapiens2 pretraining objective (MAE + [CLS] distillation + KoLeo)
on an unlabelled image folder.

Example:
    sapiens2-bench pretrain --recipe smoke_tiny --data DIR --out OUT
    sapiens2-bench pretrain --recipe cpu_small --out OUT      # renders the recipe's own images
    sapiens2-bench pretrain --config my_recipe.json --data DIR --out OUT --resume
    torchrun --nproc_per_node=2 -m benchmarks.cli.main pretrain --recipe smoke_tiny --data DIR --out OUT
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``pretrain`` subcommand."""
    p = sub.add_parser(
        "pretrain",
        help=command_help("pretrain"),
        description="Pretrain a Sapiens2 backbone with the paper's objective on a folder of unlabelled "
        "images (DIR/images when present). Writes OUT/backbone.safetensors (loadable with "
        "build_model + load_checkpoint and probe --weights), OUT/backbone.json, OUT/log.jsonl and "
        "OUT/train_state.pt (for --resume). Run under torchrun for DDP.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default=None, help="JSON config file (merged over the defaults)")
    src.add_argument("--recipe", default=None, help="a built-in recipe name (see --list-recipes)")
    p.add_argument("--data", default=None,
                   help="folder of unlabelled images (default: the recipe's own synthetic images, "
                   "rendered once and cached)")
    p.add_argument("--out", default=None, help="output folder")
    p.add_argument("--resume", action="store_true", help="continue OUT/train_state.pt (same config)")
    p.add_argument("--stop-at", type=int, default=None,
                   help="stop after this many steps in total (the schedule keeps the config's steps)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list-recipes", action="store_true", help="print the recipes and their hashes and exit")
    p.add_argument("--show-config", action="store_true", help="print the resolved config and hash, exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("pretrain"))
