"""Which metrics the leaderboard shows per task, in which order, units and direction.

Record values are in the evaluators' units (pose AP/AR and albedo errors as fractions, seg in
percent, angles in degrees, pointmap distances in the evaluated frame: metres, or canonical
focal-768 coordinates as the official evaluator uses). ``scale`` converts a record value to
the displayed unit (pose AP 0.78 -> 78.0 %), so reported and reproduced numbers read alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from sapiens2.tasks import task_names

POSE_PARTS = ("wholebody", "body", "foot", "face", "left_hand", "right_hand")


@dataclass(frozen=True)
class MetricSpec:
    """One displayed metric.

    Attributes:
        key: record metric name (official name; pose parts are ``part/stat``).
        label: column header.
        higher_is_better: direction used for "best" marks and plot annotations.
        scale: display value = record value * scale.
        headline: shown in plots and used for deltas.
    """

    key: str
    label: str
    higher_is_better: bool
    scale: float = 1.0
    headline: bool = False


def _pose_specs() -> list[MetricSpec]:
    specs = [
        # The probe's pose headline (benchmarks/probe/headline.py): the official AP is nearly binary
        # at the probe's 256x192 crops, EPE is linear in the keypoint error (docs/probing.md).
        MetricSpec("EPE", "EPE px", False, 1.0, True),
        MetricSpec("PCK@0.1", "PCK@0.1 %", True, 100.0),
        MetricSpec("PCK@0.05", "PCK@0.05 %", True, 100.0),
        MetricSpec("wholebody/AP", "AP %", True, 100.0, True),
        MetricSpec("wholebody/AR", "AR %", True, 100.0, True),
        MetricSpec("wholebody/AP .5", "AP50 %", True, 100.0),
        MetricSpec("wholebody/AP .75", "AP75 %", True, 100.0),
    ]
    for part in POSE_PARTS[1:]:
        specs.append(MetricSpec(f"{part}/AP", f"{part} AP %", True, 100.0))
        specs.append(MetricSpec(f"{part}/AR", f"{part} AR %", True, 100.0))
    return specs


_METRICS: dict[str, list[MetricSpec]] = {
    "pose": _pose_specs(),
    "seg": [
        MetricSpec("mIoU", "mIoU %", True, 1.0, True),
        MetricSpec("mAcc", "mAcc %", True, 1.0, True),
        MetricSpec("aAcc", "aAcc %", True),
        MetricSpec("mDice", "mDice %", True),
        MetricSpec("mFscore", "mFscore %", True),
    ],
    "normal": [
        MetricSpec("normal_mae", "mean deg", False, 1.0, True),
        MetricSpec("normal_median_deg", "median deg", False, 1.0, True),
        MetricSpec("normal_median_exact_deg", "median (exact) deg", False),
        MetricSpec("normal_rmse", "RMSE deg", False),
        MetricSpec("within_5_0_deg", "<5 deg %", True),
        MetricSpec("within_11_25_deg", "<11.25 deg %", True),
        MetricSpec("within_22_5_deg", "<22.5 deg %", True),
        MetricSpec("within_30_0_deg", "<30 deg %", True),
    ],
    "pointmap": [
        MetricSpec("l2_mean", "L2 x1e-2", False, 100.0, True),
        MetricSpec("rmse", "RMSE x1e-2", False, 100.0, True),
        MetricSpec("x_mae", "X abs x1e-2", False, 100.0),
        MetricSpec("y_mae", "Y abs x1e-2", False, 100.0),
        MetricSpec("z_mae", "Z abs x1e-2", False, 100.0),
        MetricSpec("within_10_cm", "<10 cm %", True, 100.0),
        MetricSpec("normal_mae", "normal mean deg", False),
        MetricSpec("scale_aligned.l2_mean", "L2 scale-aligned x1e-2", False, 100.0),
        MetricSpec("scale_aligned.rel_point_err", "rel. err scale-aligned", False),
    ],
    "albedo": [
        MetricSpec("mae", "MAE x1e-2", False, 100.0, True),
        MetricSpec("rmse", "RMSE x1e-2", False, 100.0),
        MetricSpec("psnr", "PSNR dB", True, 1.0, True),
        MetricSpec("ssim", "SSIM", True),
        MetricSpec("grad_l1", "Grad-L1 x1e-2", False, 100.0),
    ],
}


# In the task table's order; a task of the table without displayed metrics fails here, at import.
TASK_METRICS: dict[str, list[MetricSpec]] = {t: _METRICS[t] for t in task_names()}


#: notes shown next to metric columns whose numbers mislead without them, by (task, record key)
METRIC_NOTES: dict[tuple[str, str], str] = {
    ("seg", "mFscore"): (
        "mFscore is the mean F-score over the classes where it is defined (mmseg skips NaN classes): a "
        "class that is never predicted has precision 0/0, so its F-score is NaN and left out of the mean. "
        "A model that predicts only background scores its background F-score (easily above 90 %). F-score "
        "equals Dice on every predicted class; compare models by mIoU or mDice, which count a missed class "
        "as 0."
    ),
    ("seg", "mDice"): (
        "mDice counts a class present in the ground truth but never predicted as 0, unlike mFscore "
        "(which skips it): the gap between the two columns is the classes a model never predicts."
    ),
    ("seg", "aAcc"): "aAcc is pixel accuracy over all classes: dominated by the background.",
    ("normal", "normal_median_deg"): (
        "median deg is the official median: the centre of the first 0.5-degree histogram bin holding half "
        "the pixels. It moves in 0.5-degree steps and is at least 0.25 degrees even for exact predictions "
        "(so the oracle's median can exceed its mean by far); median (exact) deg is the sample median."
    ),
    ("pose", "wholebody/AP"): (
        "AP % is COCO OKS AP over all 308 keypoints unless the protocol says otherwise (a reference "
        "system's protocol can score a shared subset: never compare the two)."
    ),
}

NONFINITE_PREFIXES = ("nonfinite", "num_nonfinite")


def is_nonfinite_count(key: str) -> bool:
    """True for a metric that counts non-finite prediction values (shown in every table that has it).

    Any metric whose last name part (after ``/`` or ``.``) starts with ``nonfinite`` or
    ``num_nonfinite``, e.g. ``num_nonfinite_pred`` or ``scale_aligned.nonfinite_pred``.

    Example:
        >>> is_nonfinite_count("num_nonfinite_pred"), is_nonfinite_count("mIoU")
        (True, False)
    """
    return key.replace("/", ".").rsplit(".", 1)[-1].startswith(NONFINITE_PREFIXES)


def headline_metrics(task: str) -> list[MetricSpec]:
    """The task's headline metrics (plots and deltas)."""
    return [s for s in TASK_METRICS.get(task, []) if s.headline]


# Pose has two summary columns: the probe's headline (EPE) and the official AP, which evaluation
# protocols and reference systems report without EPE. The first column of each task is also the
# probe's headline (benchmarks.probe.headline reads it from here).
_SUMMARY_KEYS = {"pose": ("EPE", "wholebody/AP")}


def summary_metrics(task: str) -> list[MetricSpec]:
    """The columns of ``task`` in the report's cross-task summary (its first headline by default).

    Example:
        >>> [s.key for s in summary_metrics("pose")], [s.key for s in summary_metrics("seg")]
        (['EPE', 'wholebody/AP'], ['mIoU'])
    """
    heads = headline_metrics(task)
    keys = _SUMMARY_KEYS.get(task)
    if keys is None:
        return heads[:1]
    return [s for k in keys for s in heads if s.key == k]


_POSE_ALIASES = {"mAP": "wholebody/AP", "mAR": "wholebody/AR"}


def canonical_metric(task: str, key: str) -> tuple[str, bool]:
    """The leaderboard name of a record metric, and whether ``key`` was an alias.

    ``PoseEvaluator.compute()`` reports the whole-body stats under their bare official names
    (``AP``, ``AR .5``) and the probe also writes ``mAP``/``mAR``; all mean ``wholebody/<stat>``.
    """
    if task == "pose":
        if key in _POSE_ALIASES:
            return _POSE_ALIASES[key], True
        if "/" not in key and key.split(" ")[0] in ("AP", "AR"):
            return f"wholebody/{key}", True
    return key, False


def canonical_model_key(name: str) -> str:
    """Normalise a model name so that paper names and our arch names match.

    ``"Sapiens2-0.4B"`` -> ``"sapiens2_0.4b"``, ``"Sapiens-1B*"`` -> ``"sapiens_1b"``,
    ``"DINOv3-7B"`` -> ``"dinov3_7b"``.
    """
    key = name.strip().lower().replace("*", "")
    for ch in " -/":
        key = key.replace(ch, "_")
    while "__" in key:
        key = key.replace("__", "_")
    return key.strip("_")
