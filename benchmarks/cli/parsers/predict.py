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

from benchmarks.cli.commands import command_help, handler
from sapiens2.tasks import model_task_names

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
    p.set_defaults(func=handler("predict"))
