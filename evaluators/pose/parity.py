"""Golden-set handlers for the pose metric case (COCO keypoint AP) and the UDP codec case.

Tolerances come from the manifest: ``tolerance.pose`` / ``tolerance.codec`` texts are parsed for
their numbers (defaults 1e-6 on every AP/AR statistic; 1e-3 px keypoints, 1e-5 scores); a case's
own ``tolerance`` dict (``abs``, ``keypoints``, ``scores``) overrides them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from evaluators.pose.coco_ap import evaluate_parts
from evaluators.pose.coco_io import load_coco_gt, load_coco_results
from evaluators.pose.metadata import load_meta, meta_for_count
from sapiens2.codecs.udp import udp_decode
from sapiens2.parity.runner import CaseResult


def _numbers(text) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?e-?\d+|\d+\.\d+", str(text or ""))]


def detection_area_of(case: dict) -> str:
    """The detection-area convention a pose case was computed with.

    An explicit ``detection_area`` (``"body"`` or ``"part"``) wins. Otherwise the case's
    ``notes``/``reference`` decide: area from the body keypoints (the official convention) ->
    ``"body"``; an evaluation on each part's own keypoint subset with no word on the area ->
    ``"part"`` (running xtcocotools on a per-part file takes the area from that part). Default:
    ``"body"``.
    """
    if case.get("detection_area"):
        return str(case["detection_area"])
    text = f"{case.get('notes', '')} {case.get('reference', '')}".lower()
    if re.search(r"area[^.]*body keypoints|body keypoints[^.]*area", text):
        return "body"
    if "subset of each part" in text or "each part's keypoint subset" in text:
        return "part"
    return "body"


def run_pose_case(case: dict, root: Path, manifest: dict) -> CaseResult:
    """Evaluate the case's GT/results JSON with our engine and compare every expected statistic.

    Args:
        case: manifest entry with ``gt_file``, ``results_file``, ``expected`` {part: {stat: value}}
            and optionally ``meta_file`` (keypoint metadata JSON), ``use_area`` and
            ``detection_area`` (see :func:`detection_area_of`).
        root: the golden folder.
        manifest: the whole manifest (for the tolerance text).

    Returns:
        The case result; errors per ``part/stat``.
    """
    root = Path(root)
    name = case.get("name", "pose")
    tol = (case.get("tolerance") or {}).get("abs") if isinstance(case.get("tolerance"), dict) else None
    if tol is None:
        nums = _numbers((manifest.get("tolerance") or {}).get("pose"))
        tol = nums[0] if nums else 1e-6
    use_area = bool(case.get("use_area", True))
    gt, k = load_coco_gt(root / case["gt_file"], use_area=use_area)
    dets = load_coco_results(root / case["results_file"], gt, k)
    meta = load_meta(root / case["meta_file"]) if case.get("meta_file") else meta_for_count(k)
    if meta.num_keypoints != k:
        raise ValueError(f"{name}: metadata has {meta.num_keypoints} keypoints, the GT has {k}")
    ours_all = evaluate_parts(gt, dets, meta, use_area=use_area, detection_area=detection_area_of(case))
    expected = case.get("expected") or {}
    errors: dict[str, float] = {}
    missing = []
    for part, stats in expected.items():
        if part not in ours_all:
            missing.append(part)
            continue
        ours = ours_all[part]
        for stat, ref in stats.items():
            if stat not in ours:
                missing.append(f"{part}/{stat}")
                continue
            errors[f"{part}/{stat}"] = abs(ours[stat] - float(ref))
    max_err = max(errors.values()) if errors else float("nan")
    passed = bool(errors) and not missing and max_err <= tol
    msg = f"unknown parts/stats: {missing}" if missing else ("" if passed else "outside tolerance")
    return CaseResult(
        name=name,
        kind=case.get("kind", "metric"),
        passed=passed,
        max_abs_err=max_err,
        tolerance=tol,
        errors=errors,
        message=msg,
    )


def run_codec_case(case: dict, root: Path, manifest: dict) -> CaseResult:
    """Decode the case's heatmaps with :func:`sapiens2.codecs.udp.udp_decode` and compare.

    Args:
        case: manifest entry with ``file`` (safetensors: ``heatmaps`` [B x] K x H x W, ``keypoints``,
            ``scores``) and ``official_codec`` (``input_size``, ``heatmap_size``, ``blur_kernel_size``).
        root: the golden folder.
        manifest: the whole manifest (for the tolerance text).

    Returns:
        The case result: errors for ``keypoints`` (px) and ``scores``.
    """
    from safetensors.numpy import load_file

    name = case.get("name", "codec")
    codec = case.get("official_codec") or {}
    if codec.get("type", "UDPHeatmap") != "UDPHeatmap" or codec.get("heatmap_type", "gaussian") != "gaussian":
        return CaseResult(
            name=name,
            kind=case.get("kind", "codec"),
            passed=False,
            message=f"unsupported codec {codec.get('type')}/{codec.get('heatmap_type')}",
        )
    tol_case = case.get("tolerance") if isinstance(case.get("tolerance"), dict) else {}
    nums = _numbers((manifest.get("tolerance") or {}).get("codec"))
    tol_kpt = float(tol_case.get("keypoints", nums[0] if len(nums) > 0 else 1e-3))
    tol_score = float(tol_case.get("scores", nums[1] if len(nums) > 1 else 1e-5))
    data = load_file(str(Path(root) / case["file"]))
    for key in ("heatmaps", "keypoints", "scores"):
        if key not in data:
            raise KeyError(f"{case['file']}: missing tensor {key!r}")
    hm = data["heatmaps"]
    kpts, scores = udp_decode(
        hm if hm.ndim == 4 else hm[None],
        codec["input_size"],
        codec.get("heatmap_size"),
        int(codec.get("blur_kernel_size", 11)),
    )
    ref_k = data["keypoints"].reshape(kpts.shape)
    ref_s = data["scores"].reshape(scores.shape)
    err_k = float(np.abs(kpts.astype(np.float64) - ref_k).max())
    err_s = float(np.abs(scores.astype(np.float64) - ref_s).max())
    passed = err_k <= tol_kpt and err_s <= tol_score
    return CaseResult(
        name=name,
        kind=case.get("kind", "codec"),
        passed=passed,
        max_abs_err=max(err_k, err_s),
        tolerance=None,
        errors={"keypoints": err_k, "scores": err_s},
        message="" if passed else f"tolerances: keypoints {tol_kpt} px, scores {tol_score}",
    )
