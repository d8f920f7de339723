"""``sapiens2-bench eval {pose,seg,normal,pointmap,albedo}``: evaluate prediction files against GT files.

Dense tasks read folders of files matched by stem (formats in docs/evaluators.md), print a table and
write ``--json OUT`` atomically. ``pose`` reads a COCO GT JSON and a COCO results JSON
(``evaluators.pose.cli``).
"""

from __future__ import annotations

import math

DENSE_TASKS = ("seg", "normal", "pointmap", "albedo")


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate prediction files against ground truth")
    tasks = p.add_subparsers(dest="task", metavar="TASK", required=True)
    for task in DENSE_TASKS:
        t = tasks.add_parser(task, help=f"{task} predictions in a folder vs GT in a folder")
        t.add_argument("--pred", required=True, help="folder of prediction files")
        t.add_argument("--gt", required=True, help="folder of GT files (same stems)")
        t.add_argument("--mask", help="folder of mask files (same stems); default: every finite GT pixel")
        t.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON")
        t.add_argument("--batch-size", type=int, default=8, help="files per evaluator update")
        t.add_argument("--device", default="cpu", help="torch device for the metric computation")
        if task == "seg":
            t.add_argument("--num-classes", type=int, default=29)
            t.add_argument("--ignore-index", type=int, default=255)
            t.add_argument(
                "--nan-to-num",
                type=float,
                default=None,
                help="replace per-class NaN by this value before the means",
            )
        t.add_argument("--debug", action="store_true", help="show tracebacks")
        t.set_defaults(func=run)
    pose = tasks.add_parser("pose", help="COCO keypoint AP/AR from a GT JSON and a results JSON")
    pose.add_argument("--gt", required=True, help="COCO-style GT JSON")
    pose.add_argument("--results", required=True, help="COCO keypoint results JSON")
    pose.add_argument(
        "--meta",
        help="keypoint metadata: built-in name (keypoints308, coco17) or JSON (names, sigmas, parts); "
        "default: the built-in set with the GT's keypoint count (printed; an error when none or "
        "several match)",
    )
    pose.add_argument(
        "--no-area",
        action="store_true",
        help="GT without 'area' (CrowdPose/AIC/PoseTrack style): OKS scale and size ranges from "
        "0.53 x box area (xtcocotools use_area=False)",
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
    pose.add_argument("--json", dest="json_out", metavar="OUT", help="write the metrics as JSON")
    pose.add_argument("--debug", action="store_true", help="show tracebacks")
    pose.set_defaults(func=run_pose)


def run_pose(args) -> int:
    from evaluators.pose.cli import run_pose_eval

    return run_pose_eval(args)


def _default_mask(task: str, gt):
    import torch

    ok = torch.isfinite(gt).all(0)
    if task == "normal":
        ok &= gt.norm(dim=0) > 0
    return ok


def _load(task: str, item, num_classes: int):
    import torch

    from evaluators import io

    stem, pred_p, gt_p, mask_p = item
    if task == "seg":
        pred, is_labels = io.read_logits_or_labels(pred_p, "pred_seg")
        gt = torch.from_numpy(io.read_labels(gt_p, "gt_seg"))
        if is_labels and pred.shape != tuple(gt.shape):
            raise ValueError(f"{pred_p}: label map {pred.shape} does not match GT {gt_p} {tuple(gt.shape)}")
        if not is_labels and pred.shape[0] != num_classes:
            raise ValueError(f"{pred_p}: logits have {pred.shape[0]} channels, expected {num_classes}")
        return torch.from_numpy(pred), gt, None, is_labels
    kind = {"normal": "normal", "albedo": "unit", "pointmap": "float"}[task]
    pred = torch.from_numpy(io.read_image(pred_p, f"pred_{task}", kind))
    gt = torch.from_numpy(io.read_image(gt_p, f"gt_{task}", kind))
    if mask_p is not None:
        mask = torch.from_numpy(io.read_mask(mask_p))
        if tuple(mask.shape) != tuple(gt.shape[-2:]):
            raise ValueError(
                f"{mask_p}: mask {tuple(mask.shape)} does not match GT {gt_p} {tuple(gt.shape[-2:])}"
            )
    else:
        mask = _default_mask(task, gt)
    return pred, gt, mask, False


def _print_table(task: str, metrics: dict) -> None:
    rows = [(k, v) for k, v in metrics.items() if isinstance(v, (int, float))]
    width = max(len(k) for k, _ in rows)
    print(f"{task} metrics")
    for k, v in rows:
        txt = "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.6g}"
        print(f"  {k:<{width}}  {txt:>12}")


def run(args) -> int:
    from pathlib import Path

    import torch
    from tqdm import tqdm

    from evaluators import EVALUATORS, io
    from sapiens2.utils_io import write_json_atomic

    task = args.task
    items = io.pair_files(Path(args.pred), Path(args.gt), Path(args.mask) if args.mask else None)
    kwargs = {}
    if task == "seg":
        kwargs = {
            "num_classes": args.num_classes,
            "ignore_index": args.ignore_index,
            "nan_to_num": args.nan_to_num,
        }
    ev = EVALUATORS[task](**kwargs).to(args.device)
    num_classes = getattr(args, "num_classes", 0)
    batch, batch_idx = [], []

    def flush() -> None:
        if not batch:
            return
        preds, gts, masks, labels = zip(*batch)
        try:
            p = torch.stack(preds).to(args.device)
            g = torch.stack(gts).to(args.device)
        except RuntimeError as e:
            raise ValueError(f"files {batch_idx[0][1]}..{batch_idx[-1][1]}: shapes differ ({e})") from e
        idx = [i for i, _ in batch_idx]
        if task == "seg":
            ev.update(p, g, pred_is_labels=labels[0], index=idx)
        else:
            ev.update(p, g, torch.stack(masks).to(args.device), index=idx)
        batch.clear()
        batch_idx.clear()

    for i, item in enumerate(tqdm(items, desc=f"eval {task}", unit="file", disable=len(items) < 50)):
        sample = _load(task, item, num_classes)
        if batch and (
            sample[0].shape != batch[0][0].shape
            or sample[1].shape != batch[0][1].shape
            or sample[3] != batch[0][3]
        ):
            flush()
        batch.append(sample)
        batch_idx.append((i, item[0]))
        if len(batch) >= args.batch_size:
            flush()
    flush()
    res = ev.compute()
    conventions = res.pop("conventions")
    per_class = res.pop("per_class", None)
    _print_table(task, res)
    if args.json_out:
        out = {
            "task": task,
            "pred_dir": str(args.pred),
            "gt_dir": str(args.gt),
            "mask_dir": args.mask,
            "num_files": len(items),
            "metrics": res,
            "conventions": conventions,
        }
        if per_class is not None:
            out["per_class"] = per_class
        write_json_atomic(args.json_out, out)
        print(f"wrote {args.json_out}")
    return 0
