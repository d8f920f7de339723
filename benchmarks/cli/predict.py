"""``sapiens2-bench predict IMAGE --task T --checkpoint FILE``: run one Sapiens2 task model on one image.

Writes, under ``--out`` (default ``predictions/``), ``<image>_<task>.npy`` (the prediction at image
resolution: labels H x W, normals / points / albedo 3 x H x W; pose: keypoints K x 3 = x, y, score), a
``.json`` with the metadata (and the keypoints), and a ``.png`` picture. The model comes from
``--config`` (an official config name or a JSON file with an official-style config; ``arch`` may be a
settings dict), else ``--arch`` (an official arch with a released config for the task), else the
checkpoint's tensor shapes. Dense tasks resize the whole image to the model input; pose is top-down on
``--bbox`` (default: the whole image) with the pose reader's UDP crop. Without a checkpoint the command
refuses unless ``--random-weights`` is given; then every output is labelled ``random-weights``.
Library: ``sapiens2.inference``.
"""

from __future__ import annotations

import argparse

from sapiens2.tasks import task_names


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` subcommand."""
    p = sub.add_parser("predict", help="run a task model on an image and write the prediction and a picture",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("image", help="input image (PNG, JPEG or another format Pillow reads)")
    p.add_argument("--task", required=True, choices=task_names())
    p.add_argument("--checkpoint", help="official-layout task checkpoint (.safetensors or .pth)")
    p.add_argument("--arch", help="official backbone arch, e.g. sapiens2_0.4b (its released task config)")
    p.add_argument("--config", help="official config name or JSON file with an estimator config")
    p.add_argument("--input-size", help="HxW model input (default: the config's img_size)")
    p.add_argument("--bbox", help="pose: person box x1,y1,x2,y2 in image pixels (default: whole image)")
    p.add_argument("--bbox-padding", type=float, default=1.25, help="pose: box enlargement (default 1.25)")
    p.add_argument("--no-flip-test", action="store_true", help="pose: skip flip-test heatmap fusion")
    p.add_argument("--random-weights", action="store_true",
                   help="allow running without a checkpoint (randomly initialised; outputs are labelled)")
    p.add_argument("--seed", type=int, default=0, help="seed for --random-weights")
    p.add_argument("--out", default="predictions", help="output folder (default predictions/)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def _parse_bbox(text: str | None) -> tuple[float, float, float, float] | None:
    if text is None:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--bbox {text!r}: expected x1,y1,x2,y2") from None
    if not (x2 > x1 and y2 > y1):
        raise ValueError(f"--bbox {text!r}: needs x2 > x1 and y2 > y1")
    return (x1, y1, x2, y2)


def run(args: argparse.Namespace) -> int:
    """Predict and write the outputs; returns the exit code."""
    from benchmarks.cli.convert import parse_hw
    from sapiens2.inference import predict_file

    stem = predict_file(args.image, args.task, args.out, checkpoint=args.checkpoint, config=args.config,
                        arch=args.arch, input_size_hw=parse_hw(args.input_size) if args.input_size else None,
                        bbox_xyxy=_parse_bbox(args.bbox), bbox_padding=args.bbox_padding,
                        flip_test=not args.no_flip_test, random_weights=args.random_weights, seed=args.seed)
    label = " (RANDOM WEIGHTS: not a real prediction)" if args.random_weights else ""
    print(f"wrote {stem}.npy, .json and .png{label}")
    return 0
