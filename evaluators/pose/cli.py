"""``sapiens2-bench eval pose --gt GT.json --results RES.json [--meta META] [--parts P,..] [--json OUT]``.

Reads a COCO keypoint GT and a COCO keypoint results file, evaluates the whole keypoint set and
every part of the metadata (or only the ``--parts`` asked for), prints which metadata and area
convention were used and a table, and writes ``{"wholebody": {"AP": ..., ...}, "body": {...}, ...,
"conventions": {"keypoint_set", "whole_set", "keypoint_set_from", "area", "evaluation"}}``. The
whole set's row is named by the keypoint set (``whole_name``): ``wholebody`` for the whole-body sets
(308, COCO-WholeBody, Halpe), ``body`` for body-only sets, so a COCO-17 result is never labelled
whole-body.

Keypoint set: ``--meta`` (built-in name or JSON file); else the ``keypoint_set`` the file names
(``data import`` writes one); else the built-in set whose names the file's ``categories[].keypoints``
lists (:func:`sapiens2.vocab_match.keypoint_set_of_file`: spelling-insensitive; names that no built-in set
has are an error listing the sets of that count and ``--meta``); a file that lists no names only
when exactly one built-in set has its keypoint count. Never a guess between sets that score
differently (AI Challenger-14 vs CrowdPose-14, PoseTrack18 vs COCO-17). A COCO-WholeBody file in its
distributed layout (``foot_kpts``, ``face_kpts``, ...) is read as 133 keypoints, never as 17.

Area (OKS scale and size ranges): the file's ``area`` when every annotation has one; ``0.53 x`` box
area (xtcocotools ``use_area=False``, mmpose's ``BaseCocoStyleDataset``) when none has (CrowdPose,
AI Challenger, PoseTrack18); a file where only some have one is an error; ``--no-area`` forces the box.

CrowdPose (``crowdpose14``) is scored by its official evaluation (:mod:`evaluators.pose.crowd`:
xtcocotools ``keypoints_crowd``): AP, AP .5, AP .75, AR, AR .5, AR .75 and AP easy / medium / hard
by ``crowdIndex``, in place of COCO's area-range columns.

This module and everything it imports need only NumPy (and pysimdjson / orjson when installed):
no torch.
"""

from __future__ import annotations

import gc
import time

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_parts
from evaluators.pose.coco_io import load_coco_gt, load_coco_results, read_coco_file
from evaluators.pose.crowd import CROWD_STAT_NAMES, crowd_index_of, evaluate_crowd
from evaluators.pose.metadata import KeypointMeta, load_meta, meta_of_file
from sapiens2.utils_io import write_json_atomic
from sapiens2.vocab import keypoint_set, keypoint_sets
from sapiens2.vocab_mapping import keypoint_mapping, map_keypoints

AREA_FROM_FILE = "the file's 'area'"
AREA_FROM_BOX = "0.53 x box w x h (xtcocotools use_area=False; mmpose BaseCocoStyleDataset)"
CROWD_EVALUATION = "CrowdPose official: xtcocotools COCOeval(iouType='keypoints_crowd')"
COCO_EVALUATION = "COCO keypoints: xtcocotools COCOeval(iouType='keypoints')"


def _listed_names(data: dict, num_keypoints: int | None) -> list | None:
    """The keypoint names the GT's categories list (None: none; WholeBody's 17 body names count as none)."""
    for c in data.get("categories") or []:
        names = c.get("keypoints") if isinstance(c, dict) else None
        if isinstance(names, list) and names:
            if num_keypoints == 133 and len(names) == 17:
                return None  # COCO-WholeBody lists its 17 body points only; its layout says 133
            return names
    return None


def choose_meta(
    meta_path, num_keypoints: int | None, gt_name: str = "GT", data: dict | None = None
) -> tuple[KeypointMeta, str]:
    """The metadata to evaluate with, and a sentence saying how it was chosen.

    Args:
        meta_path: ``--meta`` value (built-in name, JSON path, dict, loaded metadata) or None.
        num_keypoints: the GT's keypoint count (None: no annotation).
        gt_name: the GT file name for messages.
        data: the GT dict (its ``keypoint_set`` and ``categories[].keypoints`` decide without ``--meta``).

    Raises:
        ValueError: no ``--meta`` and the file's names match no built-in set (or several that score
            differently), or it lists none and its count is not one built-in set's; or the chosen
            metadata's count differs from the GT's; or the set declares no OKS sigmas (Human3.6M).
    """
    data = data or {}
    if meta_path is not None or data.get("keypoint_set") is not None:
        given = meta_path if meta_path is not None else data["keypoint_set"]
        meta = given if isinstance(given, KeypointMeta) else load_meta(given)
        src = "from --meta" if meta_path is not None else "named by the file's keypoint_set"
        if num_keypoints is not None and meta.num_keypoints != num_keypoints:
            flag = "--meta" if meta_path is not None else f"{gt_name}: keypoint_set"
            raise ValueError(
                f"{flag} {meta.name}: {meta.num_keypoints} keypoints, but {gt_name} has {num_keypoints}"
            )
        return meta, f"metadata: {meta.name} ({meta.num_keypoints} keypoints, {src})"
    meta, how = meta_of_file(_listed_names(data, num_keypoints), num_keypoints, gt_name)
    return meta, f"metadata: {meta.name} ({meta.num_keypoints} keypoints, {how}; --meta chooses another)"


def area_convention(data: dict, forced_box: bool, gt_name: str) -> bool:
    """``use_area``: True to use the file's ``area``, False for ``0.53 x`` box (see the module docstring).

    Raises:
        ValueError: some annotations have an ``area`` and others not (naming the first without).
    """
    if forced_box:
        return False
    anns = [a for a in data.get("annotations") or [] if isinstance(a, dict)]
    missing = [i for i, a in enumerate(anns) if a.get("area") is None]
    if not missing:
        return True
    if len(missing) == len(anns):
        return False
    i = missing[0]
    raise ValueError(
        f"{gt_name}: annotations[{i}] (id {anns[i].get('id', '?')}) has no 'area' while other annotations "
        "have one: the OKS scale would mix two conventions; give every annotation an area, or pass "
        "--no-area to use 0.53 x box area for all"
    )


def evaluate_files(
    gt_path,
    results_path,
    meta_path=None,
    use_area: bool | None = None,
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
        meta_path: keypoint metadata JSON or built-in name (None: the file's, see the module docstring).
        use_area: xtcocotools' ``use_area`` (False: OKS scale and size ranges from 0.53 x box area);
            None: from the file (its ``area`` when every annotation has one, the box when none has).
        detection_area: ``"body"`` (official) or ``"part"``; see :func:`evaluate_parts`.
        parts: evaluate only these groups (``wholebody`` and/or part names); None: all.
        info: when given, sentences saying which metadata and area were chosen are appended.
        results_keypoint_set: the results' keypoint set when it is not the GT's (e.g. ``keypoints308``
            for an official Sapiens2 model on a COCO-WholeBody split): results are mapped to the GT's
            set by :func:`sapiens2.vocab_mapping.keypoint_mapping` (unmapped keypoints score 0).
        chosen: when given, the conventions used (``keypoint_set``, ``whole_set``, ``area``,
            ``evaluation``; the record's ``conventions``) are appended as one dict.

    Returns:
        ``{part: {stat: value}}`` in the metadata's order, ``wholebody`` first (CrowdPose: its
        nine official statistics, ``CROWD_STAT_NAMES``, for the whole set).
    """
    gt_name = str(gt_path)
    data = read_coco_file(gt_path, "COCO keypoint ground truth", "gt")
    if not isinstance(data, dict):
        raise ValueError(f"{gt_name}: a COCO ground truth must be a JSON object, got {type(data).__name__}")
    use_area = area_convention(data, False, gt_name) if use_area is None else use_area
    given = None if meta_path is None else load_meta(meta_path)
    gt, k = load_coco_gt(data, given.num_keypoints if given else None, use_area=use_area, source=gt_name)
    meta, how = choose_meta(given, k or None, gt_name, data)
    # an imported split says where its areas come from (data import writes 0.53 x box for sets without)
    area = (str(data.get("area_source") or AREA_FROM_FILE)) if use_area else AREA_FROM_BOX
    crowd = meta.name == "crowdpose14"
    if info is not None:
        info.append(how)
        info.append(f"area: {area}" + (f"; {CROWD_EVALUATION}" if crowd else ""))
    if chosen is not None:
        chosen.append({
            "keypoint_set": meta.name, "whole_set": meta.whole_name, "keypoint_set_from": how,
            "area": area, "evaluation": CROWD_EVALUATION if crowd else COCO_EVALUATION,
        })  # fmt: skip
    results = read_coco_file(results_path, "COCO keypoint results", "results")
    if results_keypoint_set is not None:
        results = _map_results(results, results_keypoint_set, meta, str(results_path), info)
    dets = load_coco_results(results, gt, meta.num_keypoints, source=str(results_path))
    del results
    whole = meta.whole_name
    if crowd:
        if parts is not None and parts != [whole]:
            raise ValueError(f"--parts: CrowdPose's official evaluation scores the whole set ({whole!r})")
        crowd_index = crowd_index_of(data, gt, gt_name)
        return {whole: evaluate_crowd(gt, dets, meta.sigmas, crowd_index, use_area, gt_name)}
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
    names = [n for n in (*STAT_NAMES, *CROWD_STAT_NAMES) if n in next(iter(stats.values()))]
    names = list(dict.fromkeys(names))
    head = f"{'part':<{width}}" + "".join(f"{s:>11}" for s in names)
    lines = [head, "-" * len(head)]
    for part, row in stats.items():
        lines.append(f"{part:<{width}}" + "".join(f"{row[s]:>11.4f}" for s in names))
    return "\n".join(lines)


def run_pose_eval(args) -> int:
    """Entry point of ``sapiens2-bench eval pose``; returns the exit code."""
    t0 = time.perf_counter()
    parts = getattr(args, "parts", None)
    if isinstance(parts, str):
        parts = [p.strip() for p in parts.split(",") if p.strip()]
    info: list[str] = []
    info_meta: list[dict] = []
    gc.disable()  # a short command over millions of acyclic JSON values: cycle collection only costs
    try:
        stats = evaluate_files(
            args.gt,
            args.results,
            getattr(args, "meta", None),
            use_area=False if getattr(args, "no_area", False) else None,
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
        write_json_atomic(args.json_out, {**stats, "conventions": info_meta[0]})
        print(f"wrote {args.json_out}")
    return 0
