"""Real annotation files (../shared/real, mmpose's test data): COCO-WholeBody's distributed layout,
the whole-set label of body-only sets, and the vocabulary registry against those files."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluators.pose.cli import evaluate_files
from evaluators.pose.coco_io import load_coco_gt
from sapiens2 import vocab

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
SPLIT = {"keypoints": 17, "foot_kpts": 6, "face_kpts": 68, "lefthand_kpts": 21, "righthand_kpts": 21}


def _noisy_results(gt: dict, seed: int, split: bool) -> list[dict]:
    """One detection per GT person: the GT moved by a few pixels, random scores (split or flat 133)."""
    rng = np.random.default_rng(seed)
    out = []
    for ann in gt["annotations"]:
        fields = SPLIT if split else {"keypoints": 133}
        flat = np.concatenate([np.asarray(ann[f], float).reshape(-1, 3) for f in SPLIT])
        flat[:, :2] += rng.normal(0, 4.0, (133, 2))
        flat[:, 2] = rng.uniform(0.3, 1.0, 133)
        rec = {"image_id": ann["image_id"], "category_id": 1, "score": float(rng.uniform(0.5, 1))}
        start = 0
        for f, k in fields.items():
            rec[f] = flat[start : start + k].reshape(-1).tolist()
            start += k
        out.append(rec)
    return out


def _write(tmp_path, name, obj) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def test_builtin_vocabularies_match_the_real_files():
    coco = json.loads((REAL / "coco" / "test_coco.json").read_text())
    assert list(vocab.keypoint_set("coco17").names) == coco["categories"][0]["keypoints"]
    och = json.loads((REAL / "ochuman" / "test_ochuman.json").read_text())
    assert list(vocab.keypoint_set("ochuman17").names) == och["categories"][0]["keypoints"]
    wb = vocab.keypoint_set("coco_wholebody133")
    assert wb.num_keypoints == 133 and [len(v) for v in wb.parts.values()] == list(SPLIT.values())
    assert vocab.keypoint_set("mpii16").num_keypoints == len(
        json.loads((REAL / "mpii/test_mpii.json").read_text())[0]["joints"]
    )


@pytest.mark.xtcocotools
@pytest.mark.parametrize("split_results", [True, False])
def test_wholebody_distributed_layout_equals_xtcocotools_per_part(tmp_path, split_results):
    """``eval pose`` on the split-field WholeBody GT scores 133 keypoints per part as stock xtcocotools."""
    from evaluators.pose.synthetic import xtcocotools_stats

    gt_path = REAL / "coco" / "test_coco_wholebody.json"
    gt = json.loads(gt_path.read_text())
    res = _noisy_results(gt, 0, split_results)
    info: list[str] = []
    ours = evaluate_files(gt_path, _write(tmp_path, "res.json", res), info=info)
    assert "coco_wholebody133 (133 keypoints" in info[0]
    assert list(ours) == ["wholebody", "body", "foot", "face", "left_hand", "right_hand"]
    sig = vocab.keypoint_set("coco_wholebody133").sigmas
    split_res = res if split_results else _noisy_results(gt, 0, True)
    iou = {
        "wholebody": "wholebody",
        "body": "body",
        "foot": "foot",
        "face": "face",
        "left_hand": "lefthand",
        "right_hand": "righthand",
    }
    parts = vocab.keypoint_set("coco_wholebody133").parts
    for part, name in iou.items():
        ids = list(range(133)) if part == "wholebody" else parts[part]
        ref = xtcocotools_stats(
            copy.deepcopy(gt), copy.deepcopy(split_res), sig[ids], iou_type=f"keypoints_{name}"
        )
        err = max(abs(ours[part][k] - ref[k]) for k in ref)
        assert err <= 1e-6, (part, ours[part], ref)
    assert 0.2 < ours["body"]["AP"] < 1.0  # a real score, not a degenerate one


def test_wholebody_split_fields_are_never_read_as_coco17(tmp_path):
    gt_path = REAL / "coco" / "test_coco_wholebody.json"
    gt, k = load_coco_gt(gt_path)
    assert k == 133 and gt.keypoints.shape[1:] == (133, 3)
    raw = json.loads(gt_path.read_text())
    first = raw["annotations"][0]
    np.testing.assert_array_equal(gt.keypoints[0, 17:23].reshape(-1), first["foot_kpts"])
    res = _write(tmp_path, "res.json", _noisy_results(raw, 1, True))
    with pytest.raises(ValueError, match="split layout .* 133 keypoints, but 17 were expected"):
        evaluate_files(gt_path, res, "coco17")
    broken = copy.deepcopy(raw)
    del broken["annotations"][3]["face_kpts"]
    with pytest.raises(ValueError, match=r"annotations\[3\].*needs all of"):
        load_coco_gt(_write(tmp_path, "broken.json", broken))
    mixed = copy.deepcopy(raw)
    for f in ("foot_kpts", "face_kpts", "lefthand_kpts", "righthand_kpts"):
        del mixed["annotations"][2][f]
    with pytest.raises(ValueError, match="disagree on the COCO-WholeBody split layout"):
        load_coco_gt(_write(tmp_path, "mixed.json", mixed))


def test_coco17_result_is_labelled_body_not_wholebody(tmp_path):
    gt_path = REAL / "coco" / "test_coco.json"
    raw = json.loads(gt_path.read_text())
    rng = np.random.default_rng(2)
    res = []
    for ann in raw["annotations"]:
        kp = np.asarray(ann["keypoints"], float).reshape(-1, 3)
        kp[:, :2] += rng.normal(0, 3, (17, 2))
        kp[:, 2] = 1.0
        res.append(
            {
                "image_id": ann["image_id"],
                "category_id": 1,
                "keypoints": kp.reshape(-1).tolist(),
                "score": 0.9,
            }
        )
    info: list[str] = []
    stats = evaluate_files(gt_path, _write(tmp_path, "res.json", res), info=info)
    assert list(stats) == ["body"] and "coco17" in info[0]
    assert stats == evaluate_files(gt_path, tmp_path / "res.json", "coco17", parts=["body"])
    with pytest.raises(ValueError, match="not a whole-body set"):
        evaluate_files(gt_path, tmp_path / "res.json", "coco17", parts=["wholebody"])
