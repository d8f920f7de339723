"""``sapiens2-bench system NAME``: evaluate an off-the-shelf pretrained reference system.

``system mediapipe --data DIR --out DIR [--n N]`` runs MediaPipe 0.10.21 (pose landmarker and
selfie segmenter, the models its wheel ships) on a split folder and writes leaderboard result
records: pose AP on the keypoints MediaPipe shares with the split's keypoint set (protocol
``eval:shared27-gtbox-v1`` on keypoints308, ``eval:shared{K}-{set}-gtbox-v1`` on another set, e.g.
``shared17-coco17-gtbox-v1``) and person-vs-background segmentation (``eval:person-vs-background-v1``).
These protocols are their own leaderboard tables, never ranked with full-vocabulary results.
Mapping and caveats: docs/reference_systems.md.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("system", help=command_help("system"),
                       description=__doc__.split("\n\n")[1])
    p.add_argument("name", choices=["mediapipe"], help="reference system")
    p.add_argument("--data", default=None,
                   help="split folder with split.json (default: the embedded synthetic split, 64 images)")
    p.add_argument("--out", required=True, help="folder for the result records")
    p.add_argument("--n", type=int, default=None, help="evaluate only the first N images")
    p.add_argument("--input-size", default="256x192",
                   help="top-down pose crop HxW (default 256x192, the 4:3 aspect of Sapiens2's 1024x768)")
    p.add_argument("--min-detection-confidence", type=float, default=0.5,
                   help="MediaPipe person detector threshold (default 0.5)")
    p.add_argument("--tasks", default="pose,seg", help="comma-separated: pose, seg")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("system"))
