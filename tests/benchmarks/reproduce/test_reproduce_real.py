"""``reproduce`` on imported real splits: a 308-keypoint model on COCO-WholeBody and a 29-class model on
COCO person masks, each scored in the split's vocabulary (tiny random-weight models, every path real)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.cli.main import main
from sapiens2.datasets.importers import import_dataset
from sapiens2.records.results import read_record

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
TINY = {"sapiens2_0.4b": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}}
INPUT = (64, 48)


def _save_random_model(root, task: str):
    from safetensors.torch import save_file

    from benchmarks.reproduce.tables import _adapt_config, checkpoint_path, task_config
    from sapiens2.models.builder import build_model

    torch.manual_seed(0)
    model = build_model(_adapt_config(task_config("0.4b", task), TINY, INPUT, arch_key="sapiens2_0.4b"))
    path = checkpoint_path(root, "0.4b", task)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model.eval()


def _reproduce(table, root, split, out):
    argv = ["reproduce", table, "--checkpoint-root", str(root), "--data-root", str(split), "--out", str(out)]
    argv += ["--sizes", "0.4b", "--input-size", "64x48", "--arch-settings", json.dumps(TINY), "--no-site"]
    return main(argv)


def test_reproduce_pose_on_wholebody_split_scores_133_keypoints(tmp_path, capsys):
    split = import_dataset("coco-wholebody", REAL / "coco/test_coco_wholebody.json", tmp_path / "wb")
    root = tmp_path / "ckpt"
    _save_random_model(root, "pose")
    assert _reproduce("table3", root, split, tmp_path / "out") == 0
    rec = read_record(tmp_path / "out" / "results" / "sapiens2_0.4b" / "pose.json")
    conv = rec["conventions"]
    assert conv["keypoint_set"] == "coco_wholebody133"
    assert conv["vocabulary_map"] == "model keypoints308 -> split coco_wholebody133 (declared map)"
    for part in ("body", "foot", "face", "left_hand", "right_hand"):
        assert f"{part}/AP" in rec["metrics"], part
    assert all(v is None or math.isfinite(v) for v in rec["metrics"].values())


def test_reproduce_seg_on_person_masks_maps_29_classes(tmp_path, capsys):
    split = import_dataset("coco", REAL / "coco/test_coco.json", tmp_path / "coco")
    root = tmp_path / "ckpt"
    model = _save_random_model(root, "seg")
    assert _reproduce("table4", root, split, tmp_path / "out") == 0
    rec = read_record(tmp_path / "out" / "results" / "sapiens2_0.4b" / "seg.json")
    assert rec["conventions"]["label_set"] == "person2"
    # independent: resize logits to the GT, argmax, any class but Background = Person, IoU per class
    from sapiens2.datasets import open_split

    ds = open_split(split, "seg")
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    inter, union = np.zeros(2), np.zeros(2)
    with torch.no_grad():
        for i in range(len(ds)):
            s = ds[i]
            x = F.interpolate(s["image"][None], size=INPUT, mode="bilinear", align_corners=False)
            gt = s["label"]
            logits = F.interpolate(
                model((x * 255 - mean) / std), size=gt.shape, mode="bilinear", align_corners=False
            )
            pred = (logits.argmax(1)[0] != 0).long()
            valid = gt != 255
            for c in range(2):
                p, g = (pred == c) & valid, (gt == c) & valid
                inter[c] += (p & g).sum().item()
                union[c] += (p | g).sum().item()
    want = float(np.mean(inter / union) * 100)
    assert rec["metrics"]["mIoU"] == pytest.approx(want, abs=1e-3)


def test_reproduce_pose_on_mpii_split_reports_pckh(tmp_path, capsys):
    from scipy.io import savemat

    raw = json.loads((REAL / "mpii/test_mpii.json").read_text())
    boxes = np.zeros((2, 2, len(raw)))
    boxes[1] = 40.0
    savemat(tmp_path / "heads.mat", {"headboxes_src": boxes})
    split = import_dataset(
        "mpii", REAL / "mpii/test_mpii.json", tmp_path / "mpii", headboxes=tmp_path / "heads.mat"
    )
    root = tmp_path / "ckpt"
    _save_random_model(root, "pose")
    assert _reproduce("table3", root, split, tmp_path / "out") == 0
    rec = read_record(tmp_path / "out" / "results" / "sapiens2_0.4b" / "pose.json")
    assert rec["conventions"]["keypoint_set"] == "mpii16" and "pckh" in rec["conventions"]
    assert 0.0 <= rec["metrics"]["PCKh@0.5"] <= 1.0 and "PCKh/head" in rec["metrics"]
