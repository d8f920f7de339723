"""The handler of ``sapiens2-bench pretrain``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.pretrain`.
"""

from __future__ import annotations

from sapiens2 import distributed as dist_utils
from sapiens2.pretrain.memory import check_memory
from sapiens2.pretrain.recipes import config_hash, get_recipe, list_recipes, resolve_config
from sapiens2.pretrain.trainer import pretrain
from sapiens2.utils_io import read_json


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
