"""The handler of ``sapiens2-bench predict``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.predict`.
"""

from __future__ import annotations

import argparse

from benchmarks.cli.convert import PATCH_SIZE, parse_hw
from benchmarks.reproduce.score_predictions import score_pose, summary_lines
from benchmarks.systems.mediapipe_box import MediaPipePersonBox
from sapiens2.datasets.coco_people import read_people
from sapiens2.inference import predict_files
from sapiens2.utils_io import write_json_atomic


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
