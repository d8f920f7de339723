"""One runnable example per (sub)command, shown at the end of its ``--help``.

Kept apart from the command modules so that each stays about its own options; ``main`` adds them
to every parser (``tests/benchmarks/cli/test_help.py`` parses each example with the real parser, so an example
cannot name an option that does not exist).
"""

from __future__ import annotations

import argparse

# command path (as in ``prog`` after "sapiens2-bench") -> example command lines
EXAMPLES: dict[str, list[str]] = {
    "": ["sapiens2-bench run --quick --out bench-out", "sapiens2-bench probe --list-backbones"],
    "run": ["sapiens2-bench run --quick --out bench-out",
            "sapiens2-bench run --backbones sapiens2_0.1b,dinov2_small --tasks seg,normal --seeds 0,1"],
    "compare": ["sapiens2-bench compare bench-out/results sapiens2_0.1b dinov2_small --tasks seg"],
    "parity": ["sapiens2-bench parity ../shared/golden/models --json parity.json"],
    "model-card": ["sapiens2-bench model-card --arch sapiens2_0.4b --json card.json"],
    "predict": ["sapiens2-bench predict photo.jpg --task seg --arch sapiens2_0.4b "
                "--checkpoint ckpts/seg/sapiens2_0.4b_seg.safetensors --out preds"],
    "convert": ["sapiens2-bench convert sapiens2_0.4b_seg.safetensors hf-seg --to hf --task seg"],
    "eval": ["sapiens2-bench eval normal --pred preds/normal --gt data/normal --mask data/mask"],
    "eval seg": ["sapiens2-bench eval seg --pred preds/seg --gt data/seg --num-classes 29 --json seg.json"],
    "eval normal": ["sapiens2-bench eval normal --pred preds/normal --gt data/normal --mask data/mask"],
    "eval pointmap": ["sapiens2-bench eval pointmap --pred preds/pointmap --gt data/pointmap "
                      "--mask data/mask"],
    "eval albedo": ["sapiens2-bench eval albedo --pred preds/albedo --gt data/albedo --mask data/mask"],
    "eval pose": ["sapiens2-bench eval pose --gt person_keypoints_val2017.json --results results.json "
                  "--json pose.json"],
    "data": ["sapiens2-bench data synth --out synth --n 64 --seed 0"],
    "data synth": ["sapiens2-bench data synth --out synth --n 64 --seed 0 --size 256x192"],
    "data show": ["sapiens2-bench data show synth/test --n 8 --out sheet.png"],
    "data derive": ["sapiens2-bench data derive lip-val --task depth --include docs/examples/depth_task.py"],
    "data import": ["sapiens2-bench data import coco-wholebody coco_wholebody_val_v1.0.json --images val2017 "
                    "--out wholebody-val",
                    "sapiens2-bench data import lip LIP --out lip-val --label-set lip20"],
    "probe": ["sapiens2-bench probe --backbone sapiens2_0.1b --tasks seg,normal --data synth --out probe-out",
              "torchrun --nproc_per_node 2 --no-python sapiens2-bench probe --backbone sapiens2_0.1b "
              "--data synth --out probe-out"],
    "pretrain": ["sapiens2-bench pretrain --recipe smoke_tiny --data images --out pretrain-out"],
    "leaderboard": ["sapiens2-bench leaderboard build bench-out/results --out site --include-paper"],
    "leaderboard build": ["sapiens2-bench leaderboard build bench-out/results --out site --include-paper"],
    "leaderboard validate": ["sapiens2-bench leaderboard validate bench-out/results"],
    "leaderboard schema": ["sapiens2-bench leaderboard schema --out result.schema.json"],
    "leaderboard paper": ["sapiens2-bench leaderboard paper --task seg"],
    "download": ["sapiens2-bench download --tasks seg,pose --sizes 0.4b --pretrain --checkpoint-root ckpts",
                 "sapiens2-bench download --tasks all --checkpoint-root ckpts --dry-run"],
    "reproduce": ["sapiens2-bench reproduce table4 --checkpoint-root ckpts --data-root data --out repro"],
    "system": ["sapiens2-bench system mediapipe --data synth --out mp-out --n 32"],
}


class _WrappedDescriptionFormatter(argparse.HelpFormatter):
    """Wraps the description as argparse does, but keeps the example epilog's lines."""

    def add_text(self, text):
        if text is not None and text.startswith("example"):
            self._add_item(lambda t: t + "\n", [text])
            return
        super().add_text(text)


def add_examples(parser: argparse.ArgumentParser, path: str) -> None:
    """Append the examples of command ``path`` to ``parser``'s help (its own epilog kept first)."""
    lines = EXAMPLES.get(path)
    if not lines:
        return
    text = ("example:\n" if len(lines) == 1 else "examples:\n") + "\n".join(f"  {ln}" for ln in lines)
    if parser.epilog:
        parser.epilog = f"{parser.epilog}\n\n{text}"
        return
    parser.epilog = text
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = _WrappedDescriptionFormatter
