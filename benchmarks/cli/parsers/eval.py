"""``sapiens2-bench eval {pose,seg,normal,pointmap,albedo}``: evaluate prediction files against GT files.

Dense tasks read folders of files matched by stem (formats in sapiens2/datasets/README.md), print a
table and write ``--json OUT`` atomically (library: ``evaluators.folders.evaluate_folders``). ``pose``
reads a COCO GT JSON and a COCO results JSON (``evaluators.pose.cli``).
"""

from __future__ import annotations

from benchmarks.cli.commands import command_help, handler
from sapiens2.tasks import task_names


def register(sub) -> None:
    p = sub.add_parser("eval", help=command_help("eval"))
    tasks = p.add_subparsers(dest="task", metavar="TASK", required=True)
    for task in task_names(dense=True):
        t = tasks.add_parser(task, help=f"{task} predictions in a folder vs GT in a folder")
        t.add_argument("--pred", required=True, help="folder of prediction files")
        t.add_argument("--gt", required=True, help="folder of GT files (same stems)")
        t.add_argument("--mask", help="folder of mask files (same stems); default: every finite GT pixel")
        t.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON")
        t.add_argument("--batch-size", type=int, default=8, help="files per evaluator update")
        t.add_argument("--device", default="cpu", help="torch device for the metric computation")
        t.add_argument("--png-max", type=int, default=None,
                       help="full-scale value of integer PNG maps (default: 255 or 65535 by bit depth)")
        t.add_argument("--allow-empty-masks", action="store_true",
                       help="skip files without a pixel to score (default: an error naming the file)")
        if task == "seg":
            t.add_argument("--num-classes", type=int, default=None, help="default 29, or the label set's")
            t.add_argument("--ignore-index", type=int, default=None, help="default 255, or the label set's")
            t.add_argument(
                "--label-set",
                help="the GT's classes: sapiens2_29 (default), person2, lip20, cihp20, atr18, "
                "pascal_person_part7, or a JSON file; sets the class names, count and ignore index",
            )
            t.add_argument(
                "--pred-label-set",
                help="the predictions' label set when not the GT's (e.g. sapiens2_29 on --label-set "
                "person2): label maps are remapped by the GT set's declared many-to-one map",
            )
            t.add_argument(
                "--unmapped",
                help="with --pred-label-set: predicted classes without a target class become 'ignore' "
                "or this class (default: an error naming them)",
            )
            t.add_argument(
                "--nan-to-num",
                type=float,
                default=None,
                help="replace per-class NaN by this value before the means",
            )
        t.add_argument("--debug", action="store_true", help="show tracebacks")
        t.set_defaults(func=handler("eval"))
    pose = tasks.add_parser("pose", help="COCO keypoint AP/AR from a GT JSON and a results JSON")
    pose.add_argument("--gt", required=True, help="COCO-style GT JSON")
    pose.add_argument("--results", required=True, help="COCO keypoint results JSON")
    pose.add_argument(
        "--meta",
        help="keypoint metadata: built-in name (keypoints308, coco17, aic14, ...) or JSON (names, sigmas, "
        "parts); default: the GT's keypoint_set, else the built-in set whose names its "
        "categories[].keypoints lists (printed; unknown names, or no names and a count several sets "
        "share, are an error)",
    )
    pose.add_argument(
        "--no-area",
        action="store_true",
        help="OKS scale and size ranges from 0.53 x box area for every annotation (xtcocotools "
        "use_area=False); without it: the file's 'area' when every annotation has one, 0.53 x box "
        "when none has (CrowdPose/AIC/PoseTrack18), an error when only some have",
    )
    pose.add_argument(
        "--parts",
        help="comma-separated groups to evaluate (wholebody and/or part names); default: all",
    )
    pose.add_argument(
        "--detection-area",
        choices=["body", "part"],
        default="body",
        help="a detection's area for the size ranges: box of its body keypoints for every part "
        "(official, default) or box of the scored part's keypoints",
    )
    pose.add_argument(
        "--results-keypoint-set",
        help="the results' keypoint set when it is not the GT's, e.g. keypoints308 for an official Sapiens2 "
        "model on a COCO-17 or COCO-WholeBody split: mapped by name (sapiens2/vocab_mapping.py)",
    )
    pose.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON")
    pose.add_argument("--debug", action="store_true", help="show tracebacks")
    pose.set_defaults(func=handler("eval", "run_pose"))
