"""The real-fixture anchor's PCK: a GT oracle hits every labelled point, a missed person's points are
misses (but not in the detected-only PCK), an offset beyond the threshold misses (no mediapipe needed)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.analysis import mediapipe_real_fixtures as F
from benchmarks.systems import mediapipe_system as M
from benchmarks.systems.mediapipe_keypoints import shared_subset
from sapiens2.datasets import open_split
from sapiens2.datasets.importers import import_dataset


@pytest.fixture(scope="module")
def coco(real_dir, tmp_path_factory):
    return import_dataset("coco", real_dir / "coco/test_coco.json", tmp_path_factory.mktemp("r") / "coco",
                          masks=False)


def _oracle(split, offset_image_px: float = 0.0):
    """Per person: the GT shared points as crop landmarks (+ an offset in image pixels), as PoseResults."""
    ds = open_split(split, "pose", input_size=(F.INPUT_HW[1], F.INPUT_HW[0]))
    sub = shared_subset(ds.keypoint_set)
    out = []
    for i in range(len(ds)):
        s = ds[i]
        aff = np.asarray(s["crop"]["affine"], float)
        gt = np.asarray(ds.anns[i]["keypoints"], float).reshape(-1, 3)
        img = gt[list(sub.set_ids), :2] + offset_image_px
        lm = np.zeros((33, 2))
        lm[sub.landmark_ids] = img @ aff[:, :2].T + aff[:, 2]
        out.append(M.PoseResult(lm, np.ones(33), None))
    return out, sub


def test_pck_oracle_miss_and_offset(coco):
    results, sub = _oracle(coco)
    args = (sub.landmark_ids, list(sub.set_ids))
    perfect = F.pck(coco, results, *args)
    assert perfect["PCK@0.1"] == perfect["PCK@0.1_detected"] == 1.0 and perfect["labelled_points"] > 100
    missed = F.pck(coco, [None, *results[1:]], *args)
    assert missed["PCK@0.1"] < 1.0 and missed["PCK@0.1_detected"] == 1.0
    far, _ = _oracle(coco, offset_image_px=500.0)
    assert F.pck(coco, far, *args)["PCK@0.1"] == 0.0
    with pytest.raises(RuntimeError, match="MediaPipe results for"):
        F.pck(coco, results[:-1], *args)
