"""``sapiens2-bench eval pose --gt GT.json --results RES.json [--meta META.json] [--json OUT]``.

Reads a COCO keypoint GT and a COCO keypoint results file, evaluates the whole keypoint set and
every part of the metadata (default: the built-in set with the GT's keypoint count, e.g.
keypoints308), prints a table and writes ``{"wholebody": {"AP": ..., ...}, "body": {...}, ...}``.
"""

from __future__ import annotations

import time

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_parts
from evaluators.pose.coco_io import load_coco_gt, load_coco_results
from evaluators.pose.metadata import load_meta, meta_for_count
from sapiens2.utils_io import write_json_atomic


def evaluate_files(
    gt_path, results_path, meta_path=None, use_area: bool = True, detection_area: str = "body"
) -> dict[str, dict[str, float]]:
    """AP/AR per part for a GT file and a results file.

    Args:
        gt_path: COCO GT JSON.
        results_path: COCO keypoint results JSON.
        meta_path: keypoint metadata JSON or built-in name (None: by the GT's keypoint count).
        use_area: xtcocotools' ``use_area``.
        detection_area: ``"body"`` (official) or ``"part"``; see :func:`evaluate_parts`.

    Returns:
        ``{part: {stat: value}}`` with ``wholebody`` first.
    """
    meta = None if meta_path is None else load_meta(meta_path)
    gt, k = load_coco_gt(gt_path, meta.num_keypoints if meta else None, use_area=use_area)
    if meta is None:
        meta = meta_for_count(k)
    dets = load_coco_results(results_path, gt, k)
    return evaluate_parts(gt, dets, meta, use_area=use_area, detection_area=detection_area)


def format_table(stats: dict[str, dict[str, float]]) -> str:
    """A plain-text table: one row per part, one column per statistic."""
    width = max(len(p) for p in stats) + 2
    head = f"{'part':<{width}}" + "".join(f"{s:>9}" for s in STAT_NAMES)
    lines = [head, "-" * len(head)]
    for part, row in stats.items():
        lines.append(f"{part:<{width}}" + "".join(f"{row[s]:>9.4f}" for s in STAT_NAMES))
    return "\n".join(lines)


def run_pose_eval(args) -> int:
    """Entry point of ``sapiens2-bench eval pose``; returns the exit code."""
    t0 = time.perf_counter()
    stats = evaluate_files(
        args.gt, args.results, getattr(args, "meta", None),
        detection_area=getattr(args, "detection_area", "body"),
    )
    print(format_table(stats))
    print(f"({time.perf_counter() - t0:.2f}s; -1 = no GT in that area range)")
    if getattr(args, "json_out", None):
        write_json_atomic(args.json_out, stats)
        print(f"wrote {args.json_out}")
    return 0
