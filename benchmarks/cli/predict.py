"""``sapiens2-bench predict IMAGE... --task T --checkpoint FILE``: run one Sapiens2 task model on images.

Writes, under ``--out`` (default ``predictions/``), for each image ``<image>_<task>.npy`` (the
prediction at image resolution: labels H x W, normals / points / albedo 3 x H x W; pose: keypoints
K x 3 = x, y, score), a ``.json`` with the metadata (and the keypoints) and a ``.png`` picture with a
legend (seg: the 29 classes; pointmap: a depth colour bar in the model's units; normals: the colour
key). The model is loaded once for all images.

The model comes from ``--config`` (an official config name or a JSON file with an official-style
config; ``arch`` may be a settings dict), else ``--arch`` (an official arch with a released config
for the task), else the checkpoint's tensor shapes. Dense tasks resize the whole image to the model
input. Pose is top-down on one person box with the pose reader's UDP crop: WITHOUT ``--bbox`` THE
WHOLE IMAGE IS THE PERSON BOX (no padding), which suits a photo cropped around one person; otherwise
give ``--bbox x1,y1,x2,y2`` (enlarged by ``--bbox-padding``) or ``--bbox mediapipe`` (the person box
of MediaPipe's pose detector and mask, when mediapipe is installed).

Runs on ``--device`` (default ``auto``: CUDA when available, else the CPU) in float32, or with
``--dtype bf16`` in bfloat16 autocast (its speed depends on the CPU; its measured error
against float32 is in docs/predict.md). A bar on stderr names the running stage (read checkpoint,
build model, per image: read, each forward, write); ``--quiet`` hides it. Without a checkpoint the
command refuses unless ``--random-weights`` is given; then every output is labelled
``random-weights``. Library: ``sapiens2.inference``.

Real photos with annotations: ``--boxes-from FILE`` (a COCO keypoint file, COCO-WholeBody's distributed
layout included) predicts every annotated person of each image (matched by file name) on its box
enlarged by ``--bbox-padding``; the ``.npy`` is then N x K x 3. ``--score-against FILE`` does the same
and scores the predictions in the file's keypoint set (``--vocabulary``, default: by its keypoint count):
the 308 keypoints are mapped by the declared map (sapiens2/vocab_mapping.py; COCO-WholeBody's 68 face
points have no 308 counterpart and count as misses), scored with that set's OKS sigmas and parts, and
written to ``score_pose_<set>.json``. Library: ``benchmarks.reproduce.score_predictions``.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help
from benchmarks.cli.convert import PATCH_SIZE, parse_hw
from benchmarks.reproduce.score_predictions import score_pose, summary_lines
from benchmarks.systems.mediapipe_box import MediaPipePersonBox
from sapiens2.datasets.coco_people import read_people
from sapiens2.inference import predict_files
from sapiens2.tasks import model_task_names
from sapiens2.utils_io import write_json_atomic

BBOX_HELP = ("pose: person box x1,y1,x2,y2 in image pixels, or 'mediapipe' (MediaPipe's person detector; "
             "needs mediapipe). Default: the whole image is the person box")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` subcommand."""
    p = sub.add_parser("predict", help=command_help("predict"),
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("image", nargs="+", help="input images (PNG, JPEG or another format Pillow reads)")
    p.add_argument("--task", required=True, choices=model_task_names())
    p.add_argument("--checkpoint", help="official-layout task checkpoint (.safetensors or .pth)")
    p.add_argument("--arch", help="official backbone arch, e.g. sapiens2_0.4b (its released task config)")
    p.add_argument("--config", help="official config name or JSON file with an estimator config")
    p.add_argument("--input-size", help="HxW model input (default: the config's img_size)")
    p.add_argument("--device", default="auto", help="torch device (default auto: CUDA when available)")
    p.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"),
                   help="fp32 (default) or bf16 (bfloat16 autocast; error vs fp32 in docs/predict.md)")
    p.add_argument("--bbox", help=BBOX_HELP)
    p.add_argument("--bbox-padding", type=float, default=1.25,
                   help="pose: enlargement of a given or detected box (default 1.25; not applied to the "
                        "whole-image default)")
    p.add_argument("--boxes-from", metavar="FILE",
                   help="pose: COCO keypoint file; predict every annotated person of each image on its box")
    p.add_argument("--score-against", metavar="FILE",
                   help="pose: COCO keypoint file; predict its people (as --boxes-from) and score them in "
                        "its keypoint set through the declared 308 map (writes score_pose_<set>.json)")
    p.add_argument("--vocabulary", metavar="SET",
                   help="keypoint set of --boxes-from / --score-against (e.g. coco_wholebody133, coco17, "
                        "ochuman17, or a JSON file); default: the built-in set of its keypoint count")
    p.add_argument("--no-flip-test", action="store_true", help="pose: skip flip-test heatmap fusion")
    p.add_argument("--random-weights", action="store_true",
                   help="allow running without a checkpoint (randomly initialised; outputs are labelled)")
    p.add_argument("--seed", type=int, default=0, help="seed for --random-weights")
    p.add_argument("--out", default="predictions", help="output folder (default predictions/)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or device line")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def _parse_bbox(text: str | None):
    """None, a box (x1, y1, x2, y2), or for ``mediapipe`` a callable ``rgb -> box``."""
    if text is None:
        return None
    if text.strip().lower() == "mediapipe":
        return MediaPipePersonBox()
    try:
        x1, y1, x2, y2 = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--bbox {text!r}: expected x1,y1,x2,y2 or mediapipe") from None
    if not (x2 > x1 and y2 > y1):
        raise ValueError(f"--bbox {text!r}: needs x2 > x1 and y2 > y1")
    return (x1, y1, x2, y2)


def run(args: argparse.Namespace) -> int:
    """Predict and write the outputs; returns the exit code."""
    for flag in ("bbox", "boxes_from", "score_against", "vocabulary"):
        if getattr(args, flag) is not None and args.task != "pose":
            raise ValueError(f"--{flag.replace('_', '-')} is for --task pose only (got --task {args.task})")
    people = _annotated_people(args)
    size = parse_hw(args.input_size, "--input-size", PATCH_SIZE) if args.input_size else None
    import math

    if not (math.isfinite(args.bbox_padding) and args.bbox_padding > 0):
        raise ValueError(f"--bbox-padding {args.bbox_padding}: must be a positive factor (1.25 enlarges the "
                         "box by 25 %; 0 or less would give an empty or mirrored crop)")
    stems = predict_files(args.image, args.task, args.out, checkpoint=args.checkpoint, config=args.config,
                          arch=args.arch, input_size_hw=size,
                          bbox_xyxy=_parse_bbox(args.bbox), bbox_padding=args.bbox_padding,
                          flip_test=not args.no_flip_test, random_weights=args.random_weights, seed=args.seed,
                          device=args.device, dtype=args.dtype, progress=not args.quiet,
                          boxes_of=None if people is None else _boxes_of(people))
    label = " (RANDOM WEIGHTS: not a real prediction)" if args.random_weights else ""
    for stem in stems:
        print(f"wrote {stem}.npy, .json and .png{label}")
    if args.score_against:
        _score(args, people, stems, label)
    return 0


def _annotated_people(args):
    """The people of ``--boxes-from`` / ``--score-against`` (None without either), checked first."""
    from pathlib import Path

    if args.vocabulary and not (args.boxes_from or args.score_against):
        raise ValueError("--vocabulary names the keypoint set of --boxes-from / --score-against; give one")
    src = args.score_against or args.boxes_from
    if src is None:
        return None
    both = args.boxes_from and args.score_against
    if both and Path(args.boxes_from).resolve() != Path(args.score_against).resolve():
        raise ValueError("--score-against scores the people of its own file on their boxes: --boxes-from "
                         f"{args.boxes_from} would predict other boxes; give one of the two")
    if args.bbox is not None:
        raise ValueError(f"--bbox and --{'score-against' if args.score_against else 'boxes-from'}: the boxes "
                         "come from one of them, not both")

    people = read_people(src, args.vocabulary)
    for image in args.image:  # every image has annotated people, before the model is built
        people.image(image)
    return people


def _boxes_of(people):
    def boxes(image, rgb):
        im = people.image(image)
        if im.size_hw is not None and tuple(rgb.shape[:2]) != im.size_hw:
            raise ValueError(f"{image}: image is {tuple(rgb.shape[:2])} (H, W) but {people.source} says "
                             f"{im.size_hw} for {im.file_name}")
        return [p.bbox_xyxy for p in im.people], f"annotations of {people.source}"

    return boxes


def _score(args, people, stems, label: str) -> None:
    import re
    from pathlib import Path

    import numpy as np

    preds = [(image, np.load(f"{stem}.npy")) for image, stem in zip(args.image, stems)]
    score = score_pose(people, preds)
    score["model"] = {"arch": args.arch, "config": args.config, "checkpoint": args.checkpoint,
                      "random_weights": bool(args.random_weights), "flip_test": not args.no_flip_test,
                      "predictions": [f"{stem}.npy" for stem in stems]}
    for line in summary_lines(score):
        print(line)
    tag = "_random-weights" if args.random_weights else ""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", score["vocabulary"]["keypoint_set"])  # a user set names it
    out = Path(args.out) / f"score_pose_{name}{tag}.json"
    write_json_atomic(out, score)
    print(f"wrote {out}{label}")
