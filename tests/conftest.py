"""Shared test fixtures and the skip policy.

Skip policy (one rule for the whole suite):

- A test may skip only because an *optional third-party component* is unusable, and only through its
  marker (``@pytest.mark.hf``, ``xtcocotools``, ``openmmlab``, ``exr``, ``chromium``, ``mediapipe``,
  ``mitsuba``, ``anny``;
  see :data:`OPTIONAL`). The skip reason names what failed and how to install it; ``-ra`` prints it.
  The one marker of another kind, ``bootstrap``, marks the checks of the environment
  ``scripts/bootstrap.sh`` makes (its exact pins): they skip, with the reason, in any other one.
- Missing ``../shared`` reference data, or a project module that fails to import, is a failure,
  never a skip.
- Under CI (``CI=true``; ``.ci/run`` sets it, and CI installs every extra) nothing may skip: any skip,
  from a marker or elsewhere, is reported as a failure with its reason.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SAPIENS2_SHARED", ROOT.parent / "shared"))

os.environ.setdefault("OMP_NUM_THREADS", "2")

# The shared helpers (tests/_support: toy data, fake hub, browser driver, subprocess workers) are imported
# by their bare names from test modules at any depth, and by the workers run as scripts.
SUPPORT = Path(__file__).resolve().parent / "_support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))

# Importing the toy plug-in registers a sixth task in the project's registries; only
# tests/benchmarks/probe/tasks/test_toy_task.py imports it (and unregisters it again).
# --doctest-modules would import it for every run otherwise.
collect_ignore = ["_support/_toy_task.py"]

XTCOCOTOOLS_HINT = (
    "pip install -e '.[coco]' (NumPy 1), or under NumPy 2 build it from source: pip install cython "
    "&& pip install --no-build-isolation --no-binary xtcocotools xtcocotools"
)


def strict_ci() -> bool:
    """True under CI (``CI`` set to true/1/yes), where no test may skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _import_problem(*modules: str) -> str | None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # ImportError when absent; ValueError/AttributeError on an ABI mismatch
            return f"cannot import {name} ({type(e).__name__}: {e})"
    return None


@functools.cache
def xtcocotools_problem() -> str | None:
    """Why stock xtcocotools cannot serve as the reference here, or None when it can.

    Imports the compiled part too: the prebuilt 1.14.3 wheel imports as a package under NumPy 2 but
    its ``_mask`` extension raises ``ValueError: numpy.dtype size changed`` (a NumPy-1 build).
    """
    return _import_problem("xtcocotools.cocoeval")


def _exr_problem() -> str | None:
    """None when this OpenCV build writes and reads back a float EXR (OpenCV 5 wheels ship no EXR)."""
    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    import cv2
    import numpy as np

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "probe.exr")
        try:
            ok = cv2.imwrite(path, np.ones((2, 2, 3), np.float32))
            back = cv2.imread(path, cv2.IMREAD_UNCHANGED) if ok else None
        except cv2.error as e:
            return f"OpenCV {cv2.__version__} cannot write EXR ({str(e).strip().splitlines()[-1]})"
    if back is None or back.dtype != np.float32:
        return f"OpenCV {cv2.__version__} has no working OpenEXR codec"
    return None


def _chromium_problem() -> str | None:
    problem = _import_problem("selenium.webdriver")
    if problem:
        return problem
    from browser_driver import missing_reason

    return missing_reason()


def _mediapipe_problem() -> str | None:
    # The project module imports outside the try: a broken project import fails, it never skips.
    from benchmarks.systems.mediapipe_system import require_mediapipe

    try:
        require_mediapipe()
    except RuntimeError as e:
        return str(e)
    return None


def _anny_problem() -> str | None:
    # The project module imports outside any try: a broken project import fails, it never skips.
    from sapiens2.datasets.synth.realistic.bodies import anny_problem

    return anny_problem()


def _bootstrap_problem() -> str | None:
    import sys

    venv = ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve() or not list(venv.glob(".bootstrap-*")):
        return f"the suite runs in {sys.prefix}, not in the bootstrapped {venv}"
    return None


# marker -> (what it stands for, why it is unusable or None, how to install it)
OPTIONAL = {
    "hf": ("transformers + huggingface_hub",
           lambda: _import_problem("transformers", "huggingface_hub"),
           "pip install -e . (core dependencies; or pip install 'transformers>=5,<6' huggingface_hub)"),
    "xtcocotools": ("stock xtcocotools (the pose AP reference)", xtcocotools_problem, XTCOCOTOOLS_HINT),
    "openmmlab": ("the OpenMMLab references (mmcv-lite, mmsegmentation, mmpose)",
                  lambda: _import_problem("mmcv", "mmseg.evaluation.metrics", "mmpose.codecs"),
                  "pip install -e '.[openmmlab]' && pip install --no-deps mmpose==1.3.2"),
    "exr": ("OpenCV's OpenEXR codec", _exr_problem,
            "pip install 'opencv-python>=4.8,<5' (OpenCV 5 wheels have no EXR)"),
    "chromium": ("headless Chromium driven by Selenium", _chromium_problem,
                 "bash scripts/install_chromium.sh (Debian chromium + chromium-driver) and the 'test' extra"),
    "mediapipe": ("the MediaPipe 0.10.21 reference system", _mediapipe_problem,
                  "bash scripts/install_mediapipe.sh"),
    "mitsuba": ("the Mitsuba 3 renderer of the realistic synthetic generator",
                lambda: _import_problem("mitsuba", "drjit"), "pip install -e '.[realistic]'"),
    "anny": ("anny 0.6.2 and its built model cache (the realistic synthetic people)", _anny_problem,
             "pip install anny==0.6.2, then build its cache once (tests never build it): python -c "
             "'import anny; anny.Anny(phenotypes=\"all\")'"),
    "bootstrap": ("the environment of scripts/bootstrap.sh", _bootstrap_problem,
                  "bash scripts/bootstrap.sh && .venv/bin/python -m pytest"),
}


@functools.cache
def optional_problem(marker: str) -> str | None:
    """Why the optional component behind ``marker`` is unusable here (cached), or None."""
    return OPTIONAL[marker][1]()


def skip_reason(marker: str) -> str | None:
    """The printed reason a test marked ``marker`` skips with, or None when the component works."""
    problem = optional_problem(marker)
    if problem is None:
        return None
    what, _, hint = OPTIONAL[marker]
    return f"optional [{marker}] {what} unusable: {problem}; to run it: {hint}"


def pytest_configure(config):
    for marker, (what, _, _) in OPTIONAL.items():
        config.addinivalue_line("markers", f"{marker}: needs {what} (skipped with the reason when unusable)")


def pytest_runtest_setup(item):
    """Skip a test whose optional components (by marker) are unusable, with the reason."""
    for marker in OPTIONAL:
        if item.get_closest_marker(marker) is not None:
            reason = skip_reason(marker)
            if reason is not None:
                pytest.skip(reason)


def _skip_text(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return f"{longrepr[2]} ({longrepr[0]}:{longrepr[1]})"
    return str(longrepr)


def _no_skip_under_ci(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and strict_ci():
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI, where every extra is installed and nothing may skip: "
                           f"{_skip_text(report.longrepr)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _no_skip_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _no_skip_under_ci(outcome.get_result())


@pytest.fixture(autouse=True)
def _grad_mode_left_on(request):
    """Fail the test that leaves torch's process-wide grad mode off (every later training would fail)."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None and not torch.is_grad_enabled():
        torch.set_grad_enabled(True)
        pytest.fail(f"{request.node.nodeid} left torch's grad mode disabled for the whole process "
                    "(torch.set_grad_enabled(False) outside a with-block)", pytrace=False)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's ../shared folder (reference facts and golden sets); missing data fails the test."""
    if not (SHARED / "reference").is_dir():
        pytest.fail(f"shared reference data not found at {SHARED}/reference (set SAPIENS2_SHARED to the "
                    f"folder holding reference/ and golden/); the golden-parity tests need it", pytrace=False)
    return SHARED


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """../shared/real (real photos with real annotations); missing data fails the test."""
    real = SHARED / "real"
    if not real.is_dir():
        pytest.fail(f"shared real test data not found at {real} (set SAPIENS2_SHARED to the folder holding "
                    "reference/, golden/ and real/)")
    return real


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
