"""Shared test fixtures: the shared reference/golden data and small-thread torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SAPIENS2_SHARED", ROOT.parent / "shared"))

os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's ../shared folder (reference facts and golden sets)."""
    if not (SHARED / "reference").is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set SAPIENS2_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def golden_models(shared_dir) -> Path:
    return shared_dir / "golden" / "models"


@pytest.fixture(scope="session")
def golden_metrics(shared_dir) -> Path:
    return shared_dir / "golden" / "metrics"


@pytest.fixture(scope="session")
def golden_metric_results(golden_metrics):
    """A function ``task -> [CaseResult]`` running that task's golden metric cases (at least one)."""
    from evaluators.parity import run_metric_case
    from sapiens2.utils_io import read_json

    manifest = read_json(golden_metrics / "manifest.json")

    def run(task: str) -> list:
        cases = [c for c in manifest["cases"] if c.get("task") == task]
        assert cases, f"no golden metric case for task {task!r} in {golden_metrics}"
        return [run_metric_case(case, golden_metrics, manifest) for case in cases]

    return run
