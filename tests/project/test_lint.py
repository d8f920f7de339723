"""The code base is ruff-clean (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(ruff).exists(), "ruff is not installed (it is in the 'test' extra: pip install -e '.[test]')"
    res = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
