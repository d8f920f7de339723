"""Reference facts shipped with the package (copied from the project's shared reference data).

``keypoints308.json``, ``seg_classes29.json`` and ``paper_results.csv`` are the official
vocabularies and the paper's printed numbers; ``official_archs.json`` and
``official_task_configs.json`` hold the official hyper-parameters, constructor and config dicts
and parameter counts (without the per-key state-dict shapes, which the tests read from
``../shared/reference``).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

DATA_DIR = Path(str(resources.files("sapiens2") / "data"))


@cache
def load_json(name: str) -> dict:
    """Load one of the shipped reference JSON files by file name."""
    with open(DATA_DIR / name, encoding="utf-8") as f:
        return json.load(f)


def keypoints308() -> dict:
    """The 308-keypoint vocabulary: names, sigmas, parts, skeleton, flip pairs."""
    return load_json("keypoints308.json")


def seg_classes29() -> dict:
    """The 29 body-part classes (id, name, colour) and the ignore index."""
    return load_json("seg_classes29.json")


def official_archs() -> dict:
    """Official backbone archs: settings, constructor, exact parameter counts, model-card values."""
    return load_json("official_archs.json")


def official_task_configs() -> dict:
    """Official task-model configs (20), keyed by config name."""
    return load_json("official_task_configs.json")


def paper_results_path() -> Path:
    """Path of the shipped copy of the paper's numbers (one row per number)."""
    return DATA_DIR / "paper_results.csv"
