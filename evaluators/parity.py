"""Golden-set handlers for metric and codec cases (``sapiens2-bench parity DIR``).

Dense metric cases (seg, normal, pointmap, albedo) are run here: the case's ``.safetensors`` inputs go
through our evaluator built with the case's ``official_evaluator`` options, and every expected key is
compared with the manifest's dense rule (``|ours - ref| <= 1e-4 * max(1, |ref|)``; the official seg
summary is printed rounded to 2 decimals, so it is compared within 0.01). The numbers are parsed from
the manifest's ``tolerance.dense`` text when present. Pose metric cases and codec cases are delegated
to ``evaluators.pose.parity`` (``run_codec_case`` is re-exported here).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from evaluators.albedo import AlbedoEvaluator
from evaluators.normal import NormalEvaluator
from evaluators.pointmap import PointmapEvaluator
from evaluators.pose.parity import run_codec_case, run_pose_case
from evaluators.seg import SegEvaluator
from sapiens2.parity.runner import CaseResult

__all__ = ["run_codec_case", "run_metric_case"]

DEFAULT_REL_TOL = 1e-4
DEFAULT_ROUNDED_TOL = 0.01


def _dense_tolerances(manifest: dict) -> tuple[float, float]:
    """(relative tolerance, tolerance of rounded seg summary values) from the manifest's text."""
    text = str((manifest.get("tolerance") or {}).get("dense", ""))
    rel = re.search(r"<=\s*([0-9.]+(?:e-?[0-9]+)?)\s*\*\s*max\(\s*1", text)
    rounded = re.search(r"within\s+([0-9.]+(?:e-?[0-9]+)?)", text)
    return (
        float(rel.group(1)) if rel else DEFAULT_REL_TOL,
        float(rounded.group(1)) if rounded else DEFAULT_ROUNDED_TOL,
    )


def _load_inputs(case: dict, root: Path) -> dict:
    from safetensors.torch import load_file

    path = Path(root) / case["file"]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: golden input of case {case.get('name')!r} not found")
    return load_file(str(path))


def _need(data: dict, keys: tuple[str, ...], case: dict) -> list:
    missing = [k for k in keys if k not in data]
    if missing:
        raise KeyError(f"case {case.get('name')!r}: file {case.get('file')} lacks tensors {missing}")
    return [data[k] for k in keys]


def _evaluate(case: dict, root: Path) -> dict:
    """Run our evaluator on a dense case's inputs; returns ``compute()``."""
    task = case.get("task")
    opts = case.get("official_evaluator") or {}
    data = _load_inputs(case, root)
    if task == "seg":
        logits, gt = _need(data, ("pred_logits", "gt_seg"), case)
        ev = SegEvaluator(
            num_classes=logits.shape[1],
            ignore_index=int(opts.get("ignore_index", 255)),
            nan_to_num=opts.get("nan_to_num"),
            beta=float(opts.get("beta", 1.0)),
        )
        ev.update(logits, gt, index=range(gt.shape[0]))
    elif task == "normal":
        pred, gt, mask = _need(data, ("pred_normal", "gt_normal", "mask"), case)
        kw = {"angle_thresholds": opts["angle_thresholds"]} if "angle_thresholds" in opts else {}
        if "hist_bin_size_deg" in opts:
            kw["hist_bin_size_deg"] = float(opts["hist_bin_size_deg"])
        ev = NormalEvaluator(**kw)
        ev.update(pred, gt, mask, index=range(gt.shape[0]))
    elif task == "pointmap":
        pred, gt, mask = _need(data, ("pred_pointmap", "gt_pointmap", "mask"), case)
        kw = {k: opts[k] for k in ("distance_thresholds", "angle_thresholds") if k in opts}
        ev = PointmapEvaluator(**kw)
        ev.update(pred, gt, mask, index=range(gt.shape[0]))
    elif task == "albedo":
        pred, gt, mask = _need(data, ("pred_albedo", "gt_albedo", "mask"), case)
        ev = AlbedoEvaluator()
        ev.update(pred, gt, mask, index=range(gt.shape[0]))
    else:
        raise ValueError(f"case {case.get('name')!r}: unknown metric task {task!r}")
    return ev.compute()


def _compare(ours, ref, tol_abs: float) -> tuple[float, bool]:
    """(error, ok) for one value; ``None``/NaN in the reference must be NaN in ours."""
    ref_nan = ref is None or (isinstance(ref, float) and math.isnan(ref))
    ours_nan = ours is None or (isinstance(ours, float) and math.isnan(ours))
    if ref_nan or ours_nan:
        return (0.0, True) if ref_nan and ours_nan else (math.inf, False)
    err = abs(float(ours) - float(ref))
    return err, err <= tol_abs


def compare_dense(result: dict, expected: dict, rel_tol: float, rounded_tol: float) -> tuple[dict, list[str]]:
    """Compare ``compute()`` output with a case's ``expected`` block.

    Returns:
        (errors per key, list of failure descriptions).
    """
    errors: dict[str, float] = {}
    fails: list[str] = []

    def check(key: str, ours, ref, tol: float) -> None:
        err, ok = _compare(ours, ref, tol)
        errors[key] = max(errors.get(key, 0.0), err)
        if not ok:
            fails.append(f"{key}: ours {ours} vs ref {ref}")

    for key, ref in expected.items():
        if key == "summary":
            for k, r in ref.items():
                if k not in result:
                    fails.append(f"summary.{k}: not computed")
                    continue
                # the official evaluator prints the summary rounded to 2 decimals: round ours the same way
                check(f"summary.{k}", round(result[k], 2), r, rounded_tol)
        elif key == "per_class":
            for metric, refs in ref.items():
                table = result.get("per_class", {}).get(metric)
                if table is None or len(table) != len(refs):
                    fails.append(f"per_class.{metric}: not computed for {len(refs)} classes")
                    continue
                for ours, r in zip(table.values(), refs):
                    check(f"per_class.{metric}", ours, r, rel_tol * max(1.0, abs(r or 0.0)))
        elif key == "aAcc" and "summary" in expected:  # top-level fraction next to a percent summary
            check("aAcc_fraction", result["aAcc"] / 100.0, ref, rel_tol * max(1.0, abs(ref)))
        elif key not in result:
            fails.append(f"{key}: not computed")
        else:
            check(key, result[key], ref, rel_tol * max(1.0, abs(ref)))
    return errors, fails


def run_metric_case(case: dict, root: Path, manifest: dict) -> CaseResult:
    """Run one metric case: dense tasks here, pose delegated to ``evaluators.pose.parity``."""
    name, kind = case.get("name", "?"), case.get("kind", "metric")
    if case.get("task") == "pose":
        return run_pose_case(case, Path(root), manifest)
    rel_tol, rounded_tol = _dense_tolerances(manifest)
    result = _evaluate(case, Path(root))
    errors, fails = compare_dense(result, case.get("expected") or {}, rel_tol, rounded_tol)
    finite = [e for e in errors.values() if math.isfinite(e)]
    max_err = max(finite) if finite else (math.inf if errors else math.nan)
    if not errors and not fails:
        fails.append("no expected values in the case")
    message = "; ".join(fails[:5]) + (f" (+{len(fails) - 5} more)" if len(fails) > 5 else "")
    return CaseResult(
        name=name,
        kind=kind,
        passed=not fails,
        max_abs_err=max_err,
        tolerance=None,
        errors=errors,
        message=message,
    )
