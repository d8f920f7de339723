"""``sapiens2-bench eval pose --gt GT.json --results RES.json [--meta META] [--parts P,..] [--json OUT]``.

Reads a COCO keypoint GT and a COCO keypoint results file, evaluates the whole keypoint set and
every part of the metadata (or only the ``--parts`` asked for), prints which metadata was used and
a table, and writes ``{"wholebody": {"AP": ..., ...}, "body": {...}, ..., "conventions":
{"keypoint_set", "whole_set"}}``. The whole set's row is
named by the keypoint set (``whole_name``): ``wholebody`` for the whole-body sets (308, COCO-WholeBody,
Halpe), ``body`` for body-only sets (COCO-17, MPII, CrowdPose, OCHuman), so a COCO-17 result is never
labelled whole-body.

Metadata: ``--meta`` (built-in name or JSON file); without it, the built-in set chosen for the
GT's keypoint count (``sapiens2.vocab.DEFAULT_FOR_COUNT``: 308, 17 = coco17, 133 = COCO-WholeBody,
16 = MPII, 14 = CrowdPose, 136 = Halpe). A count that no built-in set has, or that several have, or
a GT without annotations, is an error asking for ``--meta``. A COCO-WholeBody file in its
distributed layout (``foot_kpts``, ``face_kpts``, ...) is read as 133 keypoints, never as 17.

This module and everything it imports need only NumPy (and pysimdjson / orjson when installed):
no torch.
"""

from __future__ import annotations

import gc
import time

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_parts
from evaluators.pose.coco_io import load_coco_gt, load_coco_results, read_coco_file
from evaluators.pose.metadata import KeypointMeta, load_meta, meta_for_count
from sapiens2.utils_io import write_json_atomic
from sapiens2.vocab import keypoint_set, keypoint_sets
from sapiens2.vocab_mapping import keypoint_mapping, map_keypoints


def choose_meta(meta_path, num_keypoints: int | None, gt_name: str = "GT") -> tuple[KeypointMeta, str]:
    """The metadata to evaluate with, and a sentence saying how it was chosen.

    Args:
        meta_path: ``--meta`` value (built-in name, JSON path, dict, loaded metadata) or None.
        num_keypoints: the GT's keypoint count (None: no annotation).
        gt_name: the GT file name for messages.

    Returns:
        ``(meta, how)``.

    Raises:
        ValueError: no ``--meta`` and the count is unknown, matches no built-in set, or several;
            or the given metadata's count differs from the GT's.
    """
    if meta_path is not None:
        meta = meta_path if isinstance(meta_path, KeypointMeta) else load_meta(meta_path)
        if num_keypoints is not None and meta.num_keypoints != num_keypoints:
            raise ValueError(
                f"--meta {meta.name}: {meta.num_keypoints} keypoints, but {gt_name} has {num_keypoints}"
            )
        return meta, f"metadata: {meta.name} ({meta.num_keypoints} keypoints, from --meta)"
    if not num_keypoints:
        raise ValueError(f"{gt_name}: no annotation, so the keypoint count is unknown; pass --meta")
    meta = meta_for_count(num_keypoints, where=gt_name)
    return meta, (
        f"metadata: {meta.name} ({meta.num_keypoints} keypoints, chosen by the GT's keypoint count; "
        "pass --meta to use another set)"
    )


def evaluate_files(
    gt_path,
    results_path,
    meta_path=None,
    use_area: bool = True,
    detection_area: str = "body",
    parts: list[str] | None = None,
    info: list | None = None,
    results_keypoint_set=None,
    chosen: list | None = None,
) -> dict[str, dict[str, float]]:
    """AP/AR per part for a GT file and a results file.

    Args:
        gt_path: COCO GT JSON.
        results_path: COCO keypoint results JSON.
        meta_path: keypoint metadata JSON or built-in name (None: by the GT's keypoint count).
        use_area: xtcocotools' ``use_area`` (False: OKS scale and size ranges from 0.53 x box area,
            for files without ``area``).
        detection_area: ``"body"`` (official) or ``"part"``; see :func:`evaluate_parts`.
        parts: evaluate only these groups (``wholebody`` and/or part names); None: all.
        info: when given, a sentence saying which metadata was chosen is appended.
        results_keypoint_set: the results' keypoint set when it is not the GT's (e.g. ``keypoints308``
            for an official Sapiens2 model on a COCO-WholeBody split): results are mapped to the GT's
            set by :func:`sapiens2.vocab_mapping.keypoint_mapping` (unmapped keypoints score 0).
        chosen: when given, the metadata used is appended.

    Returns:
        ``{part: {stat: value}}`` in the metadata's order, ``wholebody`` first.
    """
    meta = None if meta_path is None else load_meta(meta_path)
    gt, k = load_coco_gt(gt_path, meta.num_keypoints if meta else None, use_area=use_area)
    results = read_coco_file(results_path, "COCO keypoint results", "results")
    meta, how = choose_meta(meta, k or None, str(gt_path))
    if info is not None:
        info.append(how)
    if chosen is not None:
        chosen.append(meta)
    if results_keypoint_set is not None:
        results = _map_results(results, results_keypoint_set, meta, str(results_path), info)
    dets = load_coco_results(results, gt, meta.num_keypoints, source=str(results_path))
    del results
    whole = meta.whole_name
    if parts is not None and whole != "wholebody":
        if "wholebody" in parts:
            raise ValueError(f"--parts: {meta.name} is not a whole-body set; its whole set is {whole!r}")
        parts = ["wholebody" if p == whole else p for p in parts]
    stats = evaluate_parts(gt, dets, meta, use_area=use_area, detection_area=detection_area, parts=parts)
    return {(whole if p == "wholebody" else p): row for p, row in stats.items()}


def _map_results(results, source, meta: KeypointMeta, src: str, info: list | None) -> list[dict]:
    """Results in keypoint set ``source`` rewritten in the GT's set (declared map, by name)."""
    import numpy as np

    src_set = keypoint_set(source)
    target = keypoint_set(meta.name) if meta.name in keypoint_sets() else None
    if target is None or target.names != tuple(meta.names):
        target = keypoint_set(
            {"dataset_name": meta.name, "keypoints": meta.names, "sigmas": meta.sigmas.tolist()}
        )
    mapping = keypoint_mapping(src_set, target)
    if not isinstance(results, list):
        raise ValueError(f"{src}: COCO results must be a JSON list")
    out = []
    for i, r in enumerate(results):
        kp = np.asarray(r.get("keypoints") if isinstance(r, dict) else None, dtype=np.float64).reshape(-1)
        if kp.size != 3 * src_set.num_keypoints:
            raise ValueError(
                f"{src}: result[{i}]: {kp.size} keypoint values, expected {3 * src_set.num_keypoints} "
                f"({src_set.name}, the --results-keypoint-set)"
            )
        kp = kp.reshape(1, -1, 3)
        xy, sc = map_keypoints(kp[..., :2], kp[..., 2], mapping)
        out.append({**r, "keypoints": np.concatenate([xy, sc[..., None]], -1).reshape(-1).tolist()})
    if info is not None:
        unm = mapping.unmapped_names(target)
        gap = f"; no counterpart (score 0, never a hit): {len(unm)} ({', '.join(unm[:4])}...)" if unm else ""
        info.append(
            f"results mapped {src_set.name} -> {target.name} by name: {int(mapping.mapped.sum())} of "
            f"{target.num_keypoints} keypoints{gap}"
        )
    return out


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
    parts = getattr(args, "parts", None)
    if isinstance(parts, str):
        parts = [p.strip() for p in parts.split(",") if p.strip()]
    info: list[str] = []
    info_meta: list[KeypointMeta] = []
    gc.disable()  # a short command over millions of acyclic JSON values: cycle collection only costs
    try:
        stats = evaluate_files(
            args.gt,
            args.results,
            getattr(args, "meta", None),
            use_area=not getattr(args, "no_area", False),
            detection_area=getattr(args, "detection_area", "body"),
            parts=parts,
            info=info,
            results_keypoint_set=getattr(args, "results_keypoint_set", None),
            chosen=info_meta,
        )
    finally:
        gc.enable()
    for line in info:
        print(line)
    print(format_table(stats))
    print(f"({time.perf_counter() - t0:.2f}s; -1 = no GT in that area range)")
    if getattr(args, "json_out", None):
        conventions = {"keypoint_set": info_meta[0].name, "whole_set": info_meta[0].whole_name}
        write_json_atomic(args.json_out, {**stats, "conventions": conventions})
        print(f"wrote {args.json_out}")
    return 0
