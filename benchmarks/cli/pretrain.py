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

from benchmarks.cli.commands import command_help
from sapiens2 import distributed as dist_utils
from sapiens2.pretrain.memory import check_memory
from sapiens2.pretrain.recipes import config_hash, get_recipe, list_recipes, resolve_config
from sapiens2.pretrain.trainer import pretrain
from sapiens2.utils_io import read_json


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
    p.set_defaults(func=run)


def _config(args) -> dict:
    from pathlib import Path

    if args.recipe:
        return get_recipe(args.recipe)
    if args.config:
        cfg = read_json(args.config)
        if not isinstance(cfg, dict):
            raise ValueError(f"{args.config}: expected a JSON object (a pretraining config)")
        cfg.setdefault("name", Path(args.config).stem)
        return resolve_config(cfg)
    raise ValueError("give --config FILE or --recipe NAME (see --list-recipes)")


def run(args) -> int:
    """Run the command; returns the exit code."""
    import json

    if args.list_recipes:
        for name in list_recipes():
            cfg = get_recipe(name)
            arch = cfg["model"]["backbone"]["arch"]
            arch = arch if isinstance(arch, str) else "custom"
            print(f"{name:>12s}  hash {config_hash(cfg)}  {arch}  {cfg['steps']} steps  "
                  f"{cfg['crops']['global_size'][0]}x{cfg['crops']['global_size'][1]}")
        return 0
    cfg = _config(args)
    if args.show_config:
        print(json.dumps({"config_hash": config_hash(cfg), "config": cfg}, indent=2))
        return 0

    check_memory(cfg, args.device)  # before any work: a 1B recipe on a 4 GB CPU is refused here
    if not args.out:
        raise ValueError("--out is required")
    if not args.data and cfg.get("data") is None:
        raise ValueError(f"--data is required: config {cfg['name']!r} names no data of its own")

    with dist_utils.process_group(args.device):
        result = pretrain(cfg, args.data, args.out, resume=args.resume, stop_at=args.stop_at,
                          device=args.device, progress=not args.no_progress)
        if dist_utils.is_main():
            last = result.records[-1] if result.records else {}
            shown = " ".join(f"{k}={last[k]:.4g}" for k in ("loss", "mae", "cl", "koleo") if k in last)
            print(f"pretrain {cfg['name']} (hash {result.config_hash}): steps {result.start_step}.."
                  f"{result.end_step} of {cfg['steps']} {shown}")
            print(f"backbone: {result.backbone}")
    return 0
