"""Smoke run of benchmarks/speed/probe_memory.py at a tiny n: each configuration runs in its own
subprocess and reports its peak RSS, wall and CPU time (no timing is asserted, only that it ran)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_probe_memory_runs_at_small_n(tmp_path):
    out = tmp_path / "res.json"
    cmd = [
        sys.executable, str(ROOT / "benchmarks/speed/probe_memory.py"), "--n", "8", "--sizes", "64x48",
        "--backbones", "gt-oracle,pixels", "--tasks", "seg", "--paths", "stream,forward",
        "--data-root", str(tmp_path / "data"), "--json", str(out),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(out.read_text())["numbers"]  # a measurement file (benchmarks.results)
    # the oracle has no backbone forward to measure
    assert [(r["config"]["path"], r["config"]["backbone"]) for r in res] == [
        ("stream", "gt-oracle"), ("stream", "pixels"), ("forward", "pixels"),
    ]
    for r in res:
        assert "error" not in r and "stopped" not in r, r
        assert r["peak_rss_gb"] > 0.05 and r["cpu_s"] > 0, r
        if r["config"]["path"] == "forward":
            assert r["records"] == 0 and r["images"] == 8  # 6 train + 2 test scenes (every 4th held out)
        else:
            assert r["records"] == 1
    stream = [r for r in res if r["config"]["path"] == "stream"]
    assert all(r["stages"]["features_s"] >= 0 and "statistics_s" in r["stages"] for r in stream)
    assert all(0 <= r["stages"]["test_rest_s"] <= r["probe_wall_s"] for r in stream), stream
    assert "peak GB" in proc.stdout and proc.stdout.count("gt-oracle") == 1
