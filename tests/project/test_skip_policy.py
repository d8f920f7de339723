"""The suite's skip policy (tests/conftest.py), checked on throw-away test files in a child pytest:
a marker skip prints its reason, under CI=true any skip fails, and missing ../shared data fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

TESTS = '''
import pytest

@pytest.mark.exr
def test_marked(monkeypatch):
    pass

def test_plain_skip():
    pytest.skip("some environmental reason")

def test_needs_shared(shared_dir):
    pass

def test_passes():
    pass
'''


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "browser_driver.py").write_text("def missing_reason():\n    return None\n")
    (tmp_path / "test_policy.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["SAPIENS2_SHARED"] = str(tmp_path / "no-shared-here")
    if ci is not None:
        env["CI"] = ci
    # the exr marker's check: make OpenCV's EXR codec unusable, so the marked test must skip
    env["OPENCV_IO_ENABLE_OPENEXR"] = "0"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", "-o",
                           "addopts=", str(tmp_path / "test_policy.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_outside_ci_a_marker_skips_with_its_reason_and_missing_shared_data_fails(tmp_path):
    res = _run(tmp_path, None)
    out = res.stdout
    assert res.returncode == 1, out
    assert "SKIPPED" in out and "optional [exr] OpenCV's OpenEXR codec unusable" in out, out
    assert "to run it: pip install 'opencv-python>=4.8,<5'" in out
    # a failure in the fixture's setup: pytest reports it as an error, and the run fails
    assert "ERROR test_policy.py::test_needs_shared" in out and "shared reference data not found" in out
    assert "1 passed, 2 skipped, 1 error" in out, out


def test_under_ci_nothing_may_skip(tmp_path):
    res = _run(tmp_path, "true")
    out = res.stdout
    assert res.returncode == 1, out
    assert "skipped under CI, where every extra is installed and nothing may skip" in out, out
    assert "some environmental reason" in out and "OpenEXR" in out
    assert "FAILED test_policy.py::test_plain_skip" in out and "ERROR test_policy.py::test_marked" in out
    assert "1 failed, 1 passed, 2 errors" in out, out
