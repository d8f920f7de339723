"""The paper's printed numbers (shipped with the package) mapped to our tasks, metric names and units.

``sapiens2.reference.paper_results_path()`` holds one row per printed number (columns ``paper,
table, task, dataset, model, params_b, metric, value, higher_is_better, notes, source_url``).
``load_paper_results()`` keeps the numbers of the Sapiens2 task tables (Table 2 probing, Tables
3-8 task models), converts each into the unit our evaluators report (``value``; ``value_printed``
keeps the printed number and ``factor`` the conversion) and marks it ``source="reported"`` with
its table. Secondary (third-party) v1 numbers, headline claims and ablations are not mapped.

Unit conversions (printed header -> our metric):
- numbers printed in percent (pose AP/AR, seg mIoU/mAcc, normal within-angle shares) are mapped with
  ``PCT``: divided by the display scale our evaluator declares for the metric (pose AP is a COCO
  fraction shown x100: x 0.01; seg is already in percent: x 1);
- Table 5 prints ``L2 (e^-1)``, ``X (e^-3)``, ``Y (e^-3)``, ``Z (e^-2)``: the printed number times
  that power of ten is the distance in metres. This reading satisfies ``max(|x|,|y|,|z|) <= L2 <=
  |x|+|y|+|z|`` (true for pixel-pooled means of the same errors) on the Sapiens2 and MoGe rows; the
  DUSt3R, UniDepth and VGGT rows break it under every power-of-ten reading (Z error > L2), which
  suggests L2 is measured after the scale alignment and the per-axis errors are not. ``RMSE`` has no
  printed factor and is taken as printed (it is 20-30x the L2 mean, so its unit is doubtful too).
- Table 2 albedo MAE is printed x1e-2 (x 0.01); Table 7 albedo numbers are fractions as printed.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from leaderboard.catalog import canonical_model_key, task_metrics
from sapiens2.records.view import protocol_key as record_protocol_key
from sapiens2.reference import paper_results_path

#: protocol id of the paper's (unpublished) Table 2 probing protocol; never ranked with ours.
PAPER_PROBE_PROTOCOL_ID = "paper-table2"

#: factor of a number printed in percent: 1 / the display scale our evaluator declares (see ``_factor``)
PCT = "percent"

# (table, paper task, paper metric) -> (our task, our metric, factor printed -> our unit)
_TABLE2 = {
    ("dense_probing_pose", "pose_mAP"): ("pose", "wholebody/AP", PCT),
    ("dense_probing_pose", "pose_mAR"): ("pose", "wholebody/AR", PCT),
    ("dense_probing_seg", "seg_mIoU_pct"): ("seg", "mIoU", PCT),
    ("dense_probing_seg", "seg_mAcc_pct"): ("seg", "mAcc", PCT),
    ("dense_probing_pointmap", "pointmap_L2"): ("pointmap", "l2_mean", 1.0),
    ("dense_probing_normal", "normal_mean_angular_error_deg"): ("normal", "normal_mae", 1.0),
    ("dense_probing_normal", "normal_pct_within_22.5deg"): ("normal", "within_22_5_deg", PCT),
    ("dense_probing_albedo", "albedo_MAE_x1e-2"): ("albedo", "mae", 0.01),
}
_TASK_TABLES = {
    ("pose_308kp", "mAP_pct"): ("pose", "wholebody/AP", PCT),
    ("pose_308kp", "mAR_pct"): ("pose", "wholebody/AR", PCT),
    ("body_part_seg_29cls", "mIoU_pct"): ("seg", "mIoU", PCT),
    ("body_part_seg_29cls", "mAcc_pct"): ("seg", "mAcc", PCT),
    ("pointmap", "L2_e-1"): ("pointmap", "l2_mean", 0.1),
    ("pointmap", "RMSE"): ("pointmap", "rmse", 1.0),
    ("pointmap", "X_abs_err_e-3"): ("pointmap", "x_mae", 1e-3),
    ("pointmap", "Y_abs_err_e-3"): ("pointmap", "y_mae", 1e-3),
    ("pointmap", "Z_abs_err_e-2"): ("pointmap", "z_mae", 1e-2),
    ("surface_normal", "mean_angular_error_deg"): ("normal", "normal_mae", 1.0),
    ("surface_normal", "median_angular_error_deg"): ("normal", "normal_median_deg", 1.0),
    ("surface_normal", "pct_within_5deg"): ("normal", "within_5_0_deg", PCT),
    ("surface_normal", "pct_within_11.25deg"): ("normal", "within_11_25_deg", PCT),
    ("surface_normal", "pct_within_30deg"): ("normal", "within_30_0_deg", PCT),
    ("albedo", "MAE"): ("albedo", "mae", 1.0),
    ("albedo", "RMSE"): ("albedo", "rmse", 1.0),
    ("albedo", "PSNR_dB"): ("albedo", "psnr", 1.0),
    ("albedo", "SSIM"): ("albedo", "ssim", 1.0),
    ("albedo", "Grad_L1"): ("albedo", "grad_l1", 1.0),
}
for _part, _ours in [("whole_body", "wholebody"), ("face", "face"), ("foot", "foot"),
                     ("left_hand", "left_hand"), ("right_hand", "right_hand")]:
    for _stat in ("AP", "AR"):
        _TASK_TABLES[("pose_308kp_subsets", f"{_part}_{_stat}")] = ("pose", f"{_ours}/{_stat}", PCT)

#: tables mapped, and the order in which duplicates (same model, metric, protocol) are resolved.
MAPPED_TABLES = ("Table 2", "Table 3", "Table 4", "Table 5", "Table 6", "Table 7", "Table 8 (appendix)")

COLUMNS = [
    "source", "table", "model", "model_key", "params", "task", "protocol_kind", "protocol_id",
    "protocol_key", "dataset", "metric", "value", "value_printed", "factor", "paper_metric",
    "higher_is_better", "notes", "source_url",
]


def protocol_key(kind: str, protocol_id: str | None) -> str:
    """The grouping key of a protocol: results with different keys are never ranked together.

    One rule for records and the paper's rows alike: :func:`sapiens2.records.view.protocol_key`.
    """
    return record_protocol_key(kind, protocol_id)


def _factor(task: str, metric: str, factor) -> float:
    """The printed -> our-unit factor of a mapping; ``PCT`` from the metric's declared display scale.

    Raises:
        ValueError: the mapping names a metric our evaluator does not show, or ``PCT`` for a metric not
            displayed in percent.
    """
    spec = next((m for m in task_metrics(task) if m.key == metric), None)
    if spec is None:
        raise ValueError(f"paper mapping: {task} metric {metric!r} is not shown by the {task} evaluator")
    if factor != PCT:
        return float(factor)
    if not spec.label.endswith("%"):
        raise ValueError(f"paper mapping: {task} {metric!r} is printed in percent, shown as {spec.label!r}")
    return 1.0 / spec.scale


@lru_cache(maxsize=4)
def _load(path: str) -> pd.DataFrame:
    raw = pd.read_csv(path)
    needed = {"table", "task", "dataset", "model", "params_b", "metric", "value", "notes", "source_url"}
    missing = needed - set(raw.columns)
    if missing:
        raise ValueError(f"{path}: paper results lack columns {sorted(missing)}")
    params_by_model: dict[str, float] = {}
    for model, pb in zip(raw["model"], raw["params_b"]):
        if pd.notna(pb):
            params_by_model.setdefault(canonical_model_key(model), float(pb) * 1e9)
    rows = []
    for r in raw.itertuples(index=False):
        if r.table not in MAPPED_TABLES:
            continue
        if r.table == "Table 2":
            mapped = _TABLE2.get((r.task, r.metric))
            kind, pid = "probe", PAPER_PROBE_PROTOCOL_ID
        else:
            mapped = _TASK_TABLES.get((r.task, r.metric))
            kind, pid = "eval", None
        if mapped is None:
            continue
        task, metric, factor = mapped
        factor = _factor(task, metric, factor)
        key = canonical_model_key(r.model)
        params = float(r.params_b) * 1e9 if pd.notna(r.params_b) else params_by_model.get(key)
        rows.append({
            "source": "reported", "table": r.table, "model": r.model, "model_key": key, "params": params,
            "task": task, "protocol_kind": kind, "protocol_id": pid, "protocol_key": protocol_key(kind, pid),
            "dataset": r.dataset, "metric": metric, "value": float(r.value) * factor,
            "value_printed": float(r.value), "factor": factor, "paper_metric": r.metric,
            "higher_is_better": r.higher_is_better, "notes": r.notes, "source_url": r.source_url,
        })
    return pd.DataFrame(rows, columns=COLUMNS)


@lru_cache(maxsize=4)
def _load_deduped(path: str) -> pd.DataFrame:
    df = _load(path)
    # Table 8 repeats the Table 3 whole-body numbers for Sapiens2 (and differs for v1): the main
    # table wins for a (model, protocol, metric) given twice.
    order = {t: i for i, t in enumerate(MAPPED_TABLES)}
    df = df.assign(_o=df["table"].map(order)).sort_values("_o", kind="stable")
    df = df.drop_duplicates(["model_key", "protocol_key", "task", "metric"], keep="first")
    return df.drop(columns="_o").reset_index(drop=True)


def load_paper_results(path: str | None = None, as_printed: bool = False) -> pd.DataFrame:
    """The paper's numbers, one row per (model, task, protocol, metric), marked reported.

    Args:
        path: CSV to read; the shipped copy by default.
        as_printed: keep every table as printed (Table 8 repeats some Table 3 numbers); by default a
            number given twice is kept once, from the first table of ``MAPPED_TABLES``.

    Returns:
        A DataFrame with ``COLUMNS`` (``value`` in our evaluators' units).
    """
    path = str(path or paper_results_path())
    return (_load(path) if as_printed else _load_deduped(path)).copy()
