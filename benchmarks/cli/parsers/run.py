"""``sapiens2-bench run``: the main job, end to end on the embedded synthetic data.

With no arguments: render (or reuse) the default synthetic split (384 scenes of realistic people:
anny bodies path-traced by Mitsuba; ``--generator procedural`` for the ray-cast ones), probe the default
backbones (the shipped pretrained sapiens2_cpu_small and its MAE-only variant beside their
random-init twin, dinov2_small, pixels and the ground-truth oracle) on all five tasks under the
default probing protocol (the linear read-out with the floor nested), write one result record per (backbone,
task, seed) with 95% bootstrap intervals, build the leaderboard (Markdown + self-contained HTML,
with the paper's numbers marked reported), print the headline table (value [low, high] n=N per task)
and where the report is. Every backbone X whose random-init twin ``X-random`` (or, for a shipped
backbone, the twin of another shipped backbone of its arch) is in the run, and every
``--compare A:B`` pair, is compared paired (95% paired bootstrap of the difference on the same test
images): printed and written to ``OUT/comparisons.json``.
``--quick`` runs a tiny protocol for tests (its own protocol id, never ranked with the default one) on
a small procedural split (``--generator realistic`` for the realistic one).

Backbones that take weights but get none are probed from a seeded random initialisation (the
records and the report say so); pass ``--weights NAME=PATH`` to probe pretrained weights (``probe``
takes ``--weights PATH``). Weight-free backbones (``pixels``) are labelled as such. ``gt-oracle``
(features computed from the ground truth) gives the ceiling of the decoders and the evaluation;
``floor`` (no features: the read-out's per-pixel train prior) the level a backbone must beat.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler
from benchmarks.job_defaults import DEFAULT_BACKBONES, QUICK_BACKBONES
from sapiens2.tasks import task_names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help=command_help("run"),
                       description=__doc__.split("\n\n")[1])
    p.add_argument("--quick", action="store_true", help="tiny protocol and backbones (for tests)")
    p.add_argument("--out", default="sapiens2-bench-out", help="output folder (results/ and site/)")
    p.add_argument("--backbones", default=None,
                   help=f"comma-separated backbones (default {','.join(DEFAULT_BACKBONES)}; "
                        f"--quick: {','.join(QUICK_BACKBONES)})")
    p.add_argument("--tasks", default=None,
                   help=f"comma-separated tasks (default {','.join(task_names())}; with --data: the tasks "
                        "whose ground truth it has, naming the skipped ones)")
    p.add_argument("--seeds", default="0", help="comma-separated decoder seeds")
    p.add_argument("--data", default=None, help="dataset folder (default: the embedded synthetic split)")
    p.add_argument("--generator", default=None,
                   help="the embedded split's generator: realistic (default; anny bodies path-traced by "
                        "Mitsuba) or procedural (ray-cast people; the default under --quick); "
                        "not with --data")
    p.add_argument("--weights", action="append", default=[], metavar="NAME=PATH",
                   help="weights for a backbone (repeatable), e.g. "
                        "sapiens2_0.1b=pretrain/sapiens2_0.1b.safetensors")
    p.add_argument("--include", action="append", default=[], metavar="PATH",
                   help="import this .py file or folder before resolving --backbones (repeatable)")
    p.add_argument("--compare", action="append", default=[], metavar="A:B",
                   help="also compare backbones A and B of the run paired (repeatable; X and X-random "
                        "are always compared)")
    p.add_argument("--no-paper", action="store_true", help="leave the paper's numbers out of the report")
    p.add_argument("--no-mediapipe", action="store_true",
                   help="skip the MediaPipe reference system (run only when mediapipe 0.10.21 is installed)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--keep-going", action="store_true", help="continue with the next backbone when one fails")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("run"))
