"""Clear errors for what used to end in messages naming neither the file nor the cause: a cache or
output folder inside the split it caches, a short bootstrap side file, a 9000 x 9000 image that
runs the batch out of memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmarks.probe.records.compare import paired_comparisons  # noqa: E402
from benchmarks.probe.records.sidefile import content_sha256, read_side_file, side_path, write_side_file  # noqa: E402
from leaderboard.results import read_record, write_record  # noqa: E402
from sapiens2.records.integrity import record_hash  # noqa: E402
from tests.benchmarks.probe.test_compare import N, seg_items, write_seg_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _seg_split(root: Path, sizes: list[int]) -> Path:
    """A seg split of grey squares of the given sizes (label 1 everywhere)."""
    (root / "images").mkdir(parents=True)
    (root / "seg").mkdir()
    for i, n in enumerate(sizes):
        Image.fromarray(np.full((n, n, 3), 100, np.uint8)).save(root / f"images/{i}.png")
        Image.fromarray(np.full((n, n), 1, np.uint8)).save(root / f"seg/{i}.png")
    records = [{"id": str(i), "image": f"images/{i}.png", "label": f"seg/{i}.png"} for i in range(len(sizes))]
    (root / "seg.json").write_text(json.dumps({"task": "seg", "format_version": 1, "records": records}))
    (root / "split.json").write_text(json.dumps({"name": root.name, "tasks": {"seg": "seg.json"}}))
    return root


@pytest.mark.parametrize("flag", ["sample_cache", "out_dir", "cache_dir"])
def test_a_cache_or_output_inside_the_split_is_refused_up_front(tmp_path, flag):
    from benchmarks.probe.api import RunOptions, run_probe
    from benchmarks.probe.protocol import quick_protocol

    split = _seg_split(tmp_path / "d", [32] * 6)
    out_dir = split / "cache" if flag == "out_dir" else tmp_path / "out"
    options = RunOptions(**{flag: split / "cache"}) if flag != "out_dir" else RunOptions()
    names = {"sample_cache": "--sample-cache", "out_dir": "--out", "cache_dir": "--feature-cache"}
    with pytest.raises(ValueError, match=f"{names[flag]} {split / 'cache'} is inside the split folder"):
        run_probe("pixels", "seg", split, out_dir, protocol=quick_protocol(), options=options)
    assert sorted(p.name for p in split.iterdir()) == ["images", "seg", "seg.json", "split.json"]


def test_a_short_bootstrap_side_file_is_named_with_its_counts(tmp_path):
    root = tmp_path / "r"
    write_seg_record(root, "a", seg_items(N, 0))
    b = write_seg_record(root, "b", seg_items(N, 11))
    dists, ids = read_side_file(side_path(b))
    short = {k: v[:10] for k, v in dists.items()}
    write_side_file(side_path(b), short, ids)
    rec = read_record(b)
    rec["intervals"]["bootstrap_sha256"] = content_sha256(short, ids)  # the record agrees with it
    rec["record_hash"] = record_hash(rec)
    write_record(b, rec)
    with pytest.raises(ValueError, match=rf"{side_path(b)}: 'mIoU' holds 10 resampled values but its record "
                                         r"says resamples=50 \(2 more metric"):
        paired_comparisons(root, "a", "b")


def test_a_9000_pixel_image_that_runs_out_of_memory_names_the_file_and_the_cause(tmp_path):
    """The image passes the decode check (memory for its decode is there); the batch's float copies do not
    fit: the error names the batch's file and its size, not the allocator."""
    split = _seg_split(tmp_path / "big", [96, 9000, 96])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    worker = ROOT / "tests" / "_support" / "_memory_limit_worker.py"
    proc = subprocess.run([sys.executable, str(worker), str(split), "1500"],
                          capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout.strip()
    assert proc.returncode == 3, proc.stdout + proc.stderr[-2000:]
    assert out.startswith("BatchMemoryError: data big (seg/train) (scene 1: "), out
    assert f"the largest image is 9000 x 9000 (81.0 megapixels) in {split / 'images/1.png'}" in out
    assert "out of memory preparing the batch" in out
