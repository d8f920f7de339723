"""Model cards of shipped pretrained backbones (JSON + Markdown), made from a finished run folder.

The card states what made the weights and what was measured: recipe and config hash, data seeds,
steps and images seen, the first and final losses, the weights' sha256 and size, and the wall and
CPU time of the run with the machine's load while it ran (the ``timing`` dict is measured outside,
e.g. with ``/usr/bin/time``).

Usage:
    python -m sapiens2.pretrain.card RUN_DIR --name sapiens2_cpu_small --dest sapiens2/weights \
        --timing RUN_DIR.timing.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
from pathlib import Path

from sapiens2.errors import BenchError
from sapiens2.kernels import kernel_key
from sapiens2.pretrain.recipes import config_hash
from sapiens2.utils_io import file_sha256, read_json, write_json_atomic, write_text_atomic

CARD_FORMAT = "sapiens2-model-card/1"
_TERMS = ("loss", "mae", "cl", "koleo")


def _log(run: Path) -> list[dict]:
    path = run / "log.jsonl"
    if not path.is_file():
        raise BenchError(f"{path} is missing: not a finished pretraining run folder")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _terms(row: dict) -> dict:
    return {k: row[k] for k in ("step", *_TERMS, "grad_norm") if k in row}


def build_card(run: str | Path, name: str, timing: dict | None = None) -> dict:
    """The JSON card of the backbone exported to ``run`` (``backbone.safetensors`` + ``backbone.json``).

    Args:
        run: the pretraining output folder (the run must have reached its last step).
        name: the shipped backbone's name.
        timing: measured numbers to record as they are (wall/CPU seconds, load, date, machine).

    Returns:
        The card dict.

    Raises:
        BenchError: missing files, an unfinished run, or weights that do not match their card.
    """
    run = Path(run)
    exported = read_json(run / "backbone.json")
    cfg = read_json(run / "config.json")["config"]
    rows = _log(run)
    if exported["step"] != cfg["steps"] or len(rows) != cfg["steps"]:
        raise BenchError(f"{run}: the run is not finished ({len(rows)} logged steps, exported at step "
                         f"{exported['step']}, the recipe has {cfg['steps']})")
    weights = run / "backbone.safetensors"
    sha = file_sha256(weights)
    if sha != exported["sha256"]:
        raise BenchError(f"{weights}: sha256 {sha} differs from its card's {exported['sha256']}")
    tail = rows[-20:]
    return {
        "format": CARD_FORMAT,
        "name": name,
        "weights": f"{name}.safetensors",
        "sha256": sha,
        "bytes": weights.stat().st_size,
        "params": exported["params"],
        "recipe": cfg["name"],
        "config_hash": config_hash(cfg),
        "reproduce": f"sapiens2-bench pretrain --recipe {cfg['name']} --out OUT",
        "exported": exported["exported"],
        "backbone_config": exported["backbone_config"],
        "probe_backbone": {**exported["probe_backbone"], "name": name},
        "seed": cfg["seed"],
        "data": cfg["data"],
        "steps": cfg["steps"],
        "batch_size": cfg["batch_size"],
        "images_seen": cfg["steps"] * cfg["batch_size"],
        "first_steps": [_terms(r) for r in rows[:3]],
        "last_step": _terms(rows[-1]),
        "mean_last_20_steps": {k: statistics.fmean(r[k] for r in tail) for k in _TERMS if k in tail[0]},
        # the kernel key of the machine building the card (the run's: the card is built beside its run):
        # a reproduction compares bit for bit only under the same key (sapiens2.kernels)
        "timing": {**(timing or {}), "kernels": (timing or {}).get("kernels") or kernel_key()},
        "config": cfg,
    }


def card_markdown(card: dict) -> str:
    """The human-readable card."""
    t = card.get("timing") or {}
    data = card["data"] or {}
    lines = [
        f"# {card['name']}: a Sapiens2 backbone pretrained here",
        "",
        f"Made by `{card['reproduce']}` (recipe `{card['recipe']}`, config hash `{card['config_hash']}`), "
        f"with {_objective(card)} (docs/pretraining.md). Weights: "
        f"`{card['weights']}` ({card['bytes'] / 2**20:.1f} MiB, {card['params'] / 1e6:.2f}M parameters, "
        f"the exported {card['exported']}), sha256 `{card['sha256']}`.",
        "",
        "| what | value |",
        "|---|---|",
        f"| arch | `{json.dumps(card['backbone_config'])}` |",
        f"| data | synthetic scenes, seed {data.get('seed')}, {data.get('n')} images at "
        f"{data.get('size')} (the probe's splits use seed 0: no scene is shared) |",
        f"| steps x batch | {card['steps']} x {card['batch_size']} = {card['images_seen']} images seen |",
        f"| run seed | {card['seed']} |",
    ]
    for label, row in (("first step", card["first_steps"][0]), ("last step", card["last_step"])):
        terms = ", ".join(f"{k} {row[k]:.4f}" for k in _TERMS if k in row)
        lines.append(f"| {label} (step {row['step']}) | {terms} |")
    mean = ", ".join(f"{k} {v:.4f}" for k, v in card["mean_last_20_steps"].items())
    lines.append(f"| mean of the last 20 steps | {mean} |")
    if t:
        lines += [
            f"| measured | {t.get('date', '?')} on {t.get('machine', '?')} |",
            f"| wall time | {t.get('wall_s', 0) / 60:.1f} min |",
            f"| what was timed | {t.get('includes', '?')} |",
            f"| CPU time (user + sys) | {t.get('cpu_s', 0) / 60:.1f} min; CPU time / 2 cores = "
            f"{t.get('cpu_s', 0) / 120:.1f} min |",
            f"| machine load while it ran | {t.get('load', '?')} |",
        ]
    lines += ["", "The JSON card next to this file has the full config, the first three steps' losses "
              "(for the determinism test) and the raw timing.", ""]
    return "\n".join(lines)


def _objective(card: dict) -> str:
    """The objective the card's run trained, in words (the full objective or which terms of it)."""
    paper = {"mae": 1.0, "cl": 0.4, "koleo": 0.04}
    w = {**paper, **((card.get("config") or {}).get("model") or {}).get("loss_weights", {})}
    if w == paper:
        return "the Sapiens2 objective L_MAE + 0.4 L_CL + 0.04 KoLeo"
    names = {"mae": "L_MAE", "cl": "L_CL", "koleo": "KoLeo"}
    terms = " + ".join(f"{v:g} {names[k]}" for k, v in w.items() if v)
    return f"part of the Sapiens2 objective only ({terms}; an objective ablation)"


def ship(run: str | Path, name: str, dest: str | Path, timing: dict | None = None) -> Path:
    """Copy the run's weights to ``dest/<name>.safetensors`` and write ``<name>.json`` and ``<name>.md``.

    Returns:
        The path of the shipped weights.
    """
    card = build_card(run, name, timing)
    dest = Path(dest)
    target = dest / card["weights"]
    shutil.copyfile(Path(run) / "backbone.safetensors", target)
    if file_sha256(target) != card["sha256"]:
        raise BenchError(f"{target}: copy does not match the run's weights")
    write_json_atomic(dest / f"{name}.json", card)
    write_text_atomic(dest / f"{name}.md", card_markdown(card))
    return target


def main(argv=None) -> int:
    """Command line: ship a finished run's backbone with its cards."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="finished pretraining output folder")
    p.add_argument("--name", required=True, help="shipped backbone name")
    p.add_argument("--dest", default=str(Path(__file__).resolve().parents[1] / "weights"))
    p.add_argument("--timing", default=None, help="JSON file of measured times to record")
    args = p.parse_args(argv)
    timing = read_json(args.timing) if args.timing else {}
    timing.setdefault("machine", f"{platform.machine()} {platform.processor() or ''}".strip())
    print(ship(args.run, args.name, args.dest, timing))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
