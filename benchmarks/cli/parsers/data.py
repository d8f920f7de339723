"""``sapiens2-bench data``: make synthetic splits (``synth``), import public datasets (``import``) and look
at a split (``show``)."""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler
from benchmarks.job_defaults import SPLIT_SPP


def _size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"size must be HxW, e.g. 256x192, got {text!r}") from e
    return h, w


def register(sub) -> None:
    """Add the ``data`` command and its ``synth`` / ``show`` subcommands."""
    p = sub.add_parser("data", help=command_help("data"))
    dsub = p.add_subparsers(dest="data_command", metavar="{synth,import,derive,show}")
    s = dsub.add_parser("synth", help="render synthetic people with ground truth for all five tasks")
    s.add_argument("--out", required=True, help="output split folder (must not exist unless --overwrite)")
    s.add_argument("--n", type=int, default=64, help="number of images (default 64)")
    s.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    s.add_argument("--size", type=_size, default=(256, 192), help="image size HxW (default 256x192)")
    s.add_argument("--workers", type=int, default=1, help="render processes (default 1)")
    s.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    s.add_argument("--generator", default="realistic",
                   help="realistic (default: anny bodies rendered by Mitsuba, the 'realistic' extra; the "
                        "main job's split) or procedural (embedded ray-cast people, no extra needed)")
    s.add_argument("--render", default=None,
                   help="realistic image mode: path (path tracing, default) or fast (direct light, 4 "
                        "samples: CI-sized splits)")
    s.add_argument("--spp", type=int, default=None,
                   help=f"samples per pixel of --render path (default {SPLIT_SPP}, the main job's)")
    s.add_argument("--people", type=int, default=None,
                   help="realistic: 1..PEOPLE people per image (default 2)")
    s.add_argument("--scenes", default=None,
                   help="realistic: the scene mix (default 'default', the benchmark's; the others are the "
                        "realism measurement's controls, each easier in one respect: "
                        "sapiens2/datasets/synth/realistic/mixes.py, docs/synthetic_data.md)")
    s.add_argument("--shard", default=None,
                   help="i/N: render only shard i of N (scenes i, i+N, ...) into OUT.shard-i-of-N; "
                        "then --merge-shards N makes the split")
    s.add_argument("--merge-shards", type=int, default=None, metavar="N",
                   help="combine the N rendered shards of --out into the split (and remove them)")
    s.set_defaults(func=handler("data", "run_synth"))
    imp = dsub.add_parser(
        "import",
        help="make a split folder from a public dataset's files (manifests point at them, no copies)",
        description="Formats: COCO-style keypoint JSON (coco, coco-wholebody in either layout, crowdpose, "
        "ochuman, halpe, aic, mhp, humanart, humanart21, posetrack18; person masks too when annotations "
        "have segmentation; no 'area' in the source: w * h * 0.53 of the box, recorded), mpii (mmpose's "
        "JSON), "
        "coco-person-masks, and body-part PNG folders (lip, cihp, atr, pascal-person-part, parts). "
        "Recipes: sapiens2/datasets/README.md.",
    )
    imp.add_argument("format", help="the source's format (see above; an unknown one lists them)")
    imp.add_argument("src", help="annotation file (COCO-style, MPII) or dataset folder (part PNGs)")
    imp.add_argument("--out", required=True, help="the new split folder (must not exist unless --overwrite)")
    imp.add_argument("--images", help="folder of the images (default: the annotation file's folder, or the "
                     "layout's image folder)")
    imp.add_argument("--labels", help="folder of the label PNGs (part folders; default: the layout's)")
    imp.add_argument("--keypoint-set", help="keypoint set name or JSON instead of the format's")
    imp.add_argument("--label-set", help="label set name or JSON (part folders; required for 'parts')")
    imp.add_argument("--headboxes", help="MPII mpii_gt_val.mat: head boxes, for PCKh")
    imp.add_argument("--no-masks", action="store_true", help="do not write person masks from 'segmentation'")
    imp.add_argument("--overwrite", action="store_true", help="replace an earlier split at --out")
    imp.set_defaults(func=handler("data", "run_import"))
    der = dsub.add_parser(
        "derive", help="write a task's ground truth into a split from the other tasks' (its writer)",
        description="For a task whose spec has a ground-truth writer (TaskSpec.write_ground_truth, usually a "
        "plug-in's: load it with --include), write its files and manifest into a split made before (imported "
        "or rendered), from the ground truth of the split's other dense tasks. `data synth` runs every "
        "registered writer by itself.",
    )
    der.add_argument("dir", help="split folder (with split.json)")
    der.add_argument("--task", required=True, help="the task to write (a registered task with a writer)")
    der.add_argument("--overwrite", action="store_true", help="replace the task's ground truth if present")
    der.set_defaults(func=handler("data", "run_derive"))
    show_doc = ("One row per image: raw image, image + skeleton and boxes, parts, normals, depth with a "
                "colour bar (metres), albedo; a footer with the 29 part classes and the normal colour key.")
    v = dsub.add_parser("show", help="contact sheet of a split: raw image, every ground truth, legends",
                        description=show_doc)
    v.add_argument("dir", help="split folder (with split.json)")
    v.add_argument("--out", default=None,
                   help="PNG path outside the split (default: DIR_contact_sheet.png beside DIR)")
    v.add_argument("--n", type=int, default=6, help="number of images (default 6)")
    v.add_argument("--tile-height", type=int, default=320, help="tile height in pixels (default 320)")
    v.set_defaults(func=handler("data", "run_show"))
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
