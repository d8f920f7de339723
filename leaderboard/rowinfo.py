"""What a leaderboard row is (its kind), where it comes from (provenance) and its confidence interval.

Kinds, from the record's ``model`` and ``config`` (never from the display name alone):

- ``oracle``: ``gt-oracle``, features computed from the ground truth: the ceiling of decoder and
  evaluation, shown as a reference row and never ranked;
- ``floor``: ``floor``, no features: the read-out's per-pixel train prior, the level a backbone
  must beat to show that its features hold anything; shown as a reference row and never ranked;
- ``reference``: an external pretrained system (``config.system``, e.g. MediaPipe) under its own protocol;
- ``weight-free``: a backbone without weights (``model.weights == "none"``, e.g. ``pixels``);
- ``random-init``: a seeded random initialisation (``model.weights`` starts with ``random``);
- ``pretrained``: a checkpoint (``model.checkpoint``) or named weights;
- ``unknown``: the record does not say which weights were used.

Example:
    >>> row_kind({"name": "sapiens2_0.1b", "weights": "random(seed=0)"}, {})
    'random-init'
    >>> row_kind({"name": "x", "checkpoint": {"path": "x.safetensors", "sha256": None}}, {})
    'pretrained'
"""

from __future__ import annotations

import math

from leaderboard.catalog import canonical_metric
from sapiens2.records.view import Record, RecordView

ORACLE_NAMES = ("gt-oracle",)
ORACLE_BACKBONES = ("GroundTruthOracle",)
FLOOR_NAMES = ("floor",)
FLOOR_BACKBONES = ("FeatureFreeFloor",)
#: kinds shown as reference rows (never ranked or bolded)
REFERENCE_KINDS = ("oracle", "floor")
#: kinds never ranked: the reference rows and external reference systems (shown for orientation)
UNRANKED_KINDS = (*REFERENCE_KINDS, "reference")

#: display label of each kind (the "kind" column of every table)
KIND_LABELS = {
    "oracle": "ceiling (GT oracle)",
    "floor": "floor (no features)",
    "reference": "reference system",
    "weight-free": "weight-free",
    "random-init": "random init",
    "pretrained": "pretrained",
    "unknown": "weights not recorded",
    "reported": "paper",
}

#: display label of each source
SOURCE_LABELS = {"reproduced": "measured", "reported": "reported"}


def row_kind(model: dict, config: dict | None) -> str:
    """The kind of a record's row (see the module docstring)."""
    if model.get("name") in ORACLE_NAMES or model.get("backbone") in ORACLE_BACKBONES:
        return "oracle"
    if model.get("name") in FLOOR_NAMES or model.get("backbone") in FLOOR_BACKBONES:
        return "floor"
    if isinstance(config, dict) and config.get("system"):
        return "reference"
    weights = str(model.get("weights") or "").strip().lower()
    if weights == "none":
        return "weight-free"
    if weights.startswith("random"):
        return "random-init"
    if model.get("checkpoint") or weights:
        return "pretrained"
    return "unknown"


def record_provenance(rec: Record) -> dict:
    """Short provenance fields of one record for display.

    Returns:
        ``{"kind", "commit", "weights_sha", "weights", "created", "n"}``: the git commit (10 hex, ``+dirty``
        when the tree had uncommitted changes), the checkpoint's sha256 (12 hex), the weights text,
        the creation date (``YYYY-MM-DD``), and the number of test samples (``None`` when unknown).
    """
    view = RecordView.of(rec)
    prov, model, intervals = view.provenance, view.model, view.intervals
    commit = (prov.git_commit or "")[:10]
    if commit and prov.git_dirty:
        commit += "+dirty"
    n = view.dataset.num_samples
    if n is None and intervals is not None and intervals.n is not None:
        n = intervals.n
    return {
        "kind": row_kind(model.as_dict(), dict(view.config)),
        "commit": commit,
        "weights_sha": (model.checkpoint_sha256 or "")[:12],
        "weights": str(model.weights or ""),
        "created": view.created_utc[:10],
        "n": None if n is None else int(n),
    }


def record_intervals(rec: Record) -> dict[str, dict]:
    """The record's confidence intervals by leaderboard metric name.

    Returns:
        ``{metric: {"low", "high", "level", "method", "resamples", "n"}}`` (empty without ``intervals``).

    Example:
        >>> rec = {"task": "pose", "metrics": {"AP": 0.4}, "intervals": {"level": 0.95, "method": "bootstrap",
        ...        "resamples": 1000, "seed": 0, "n": 40, "bounds": {"AP": [0.3, 0.5]}}}
        >>> record_intervals(rec)["wholebody/AP"]["high"]
        0.5
    """
    view = RecordView.of(rec)
    out = {}
    for raw, iv in view.metric_intervals().items():
        if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
            continue
        metric, alias = canonical_metric(view.task, raw)
        if metric in out and alias:  # an explicit name wins over an alias
            continue
        out[metric] = {"low": iv.lo, "high": iv.hi, "level": iv.level, "method": iv.method,
                       "resamples": iv.resamples, "n": iv.n}
    return out


def has_pretrained_row(kinds) -> bool:
    """True when any probed backbone or task model (not the oracle or a reference system) is pretrained."""
    return any(k == "pretrained" for k in kinds)
