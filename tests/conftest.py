"""Shared test fixtures: the shared reference/golden data, small-thread torch, optional references."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SAPIENS2_SHARED", ROOT.parent / "shared"))

os.environ.setdefault("OMP_NUM_THREADS", "2")

XTCOCOTOOLS_HINT = (
    "pip install -e '.[coco]' (NumPy 1), or under NumPy 2 build it from source: pip install cython "
    "&& pip install --no-build-isolation --no-binary xtcocotools xtcocotools"
)


@functools.cache
def xtcocotools_problem() -> str | None:
    """Why stock xtcocotools cannot serve as the reference here, or None when it can.

    Imports the compiled part too: the prebuilt 1.14.3 wheel imports as a package under NumPy 2 but
    its ``_mask`` extension raises ``ValueError: numpy.dtype size changed`` (a NumPy-1 build).
    """
    try:
        from xtcocotools.cocoeval import COCOeval  # noqa: F401
    except Exception as e:  # ImportError when absent, ValueError on a NumPy ABI mismatch
        return f"{type(e).__name__}: {e}"
    return None


def pytest_runtest_setup(item):
    """Skip tests marked ``xtcocotools`` with the reason when stock xtcocotools is unusable."""
    if item.get_closest_marker("xtcocotools") is not None:
        problem = xtcocotools_problem()
        if problem is not None:
            pytest.skip(f"stock xtcocotools (the pose AP reference) unusable: {problem}; {XTCOCOTOOLS_HINT}")


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


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one thread is faster, and far faster on a shared, busy CPU (no spinning workers)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
