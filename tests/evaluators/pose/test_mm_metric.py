"""The mmengine PoseMetric takes its keypoint vocabulary from the dataset_meta mmengine gives it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from evaluators.pose.mm_metric import PoseMetric, meta_from_dataset_meta

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails


def _mmpose_meta(name: str) -> dict:
    """mmpose's reading of its dataset description (the tests using it carry the openmmlab marker)."""
    from mmpose.datasets.datasets.utils import parse_pose_metainfo

    return parse_pose_metainfo(dict(from_file=str(REAL / "meta" / f"{name}.py")))


def _samples():
    gt = json.loads((REAL / "coco" / "test_coco.json").read_text())
    rng = np.random.default_rng(0)
    out = []
    for i, ann in enumerate(gt["annotations"]):
        kp = np.reshape(ann["keypoints"], (17, 3)).astype(float)
        out.append({
            "pred_instances": {"keypoints": (kp[None, :, :2] + rng.normal(0, 2, (1, 17, 2))),
                               "keypoint_scores": np.ones((1, 17))},
            "img_id": ann["image_id"], "sample_idx": i, "raw_ann_info": ann,
        })  # fmt: skip
    return out


@pytest.mark.openmmlab
def test_pose_metric_takes_the_vocabulary_from_dataset_meta():
    metric = PoseMetric()
    metric.dataset_meta = _mmpose_meta("coco")
    assert metric.evaluator.meta.name == "coco17"
    metric.process([], _samples())
    res = metric.evaluate(14)
    assert 0.5 < res["pose/AP"] <= 1.0 and "pose/PCK@0.05" in res
    assert metric.last_conventions["keypoint_set"] == "coco17"
    crowd = meta_from_dataset_meta(_mmpose_meta("crowdpose"))
    assert crowd.name == "crowdpose14" and crowd.num_keypoints == 14


def test_pose_metric_without_meta_or_dataset_meta_says_how_to_fix():
    with pytest.raises(ValueError, match="no meta= was given and no dataset_meta.*pass meta=NAME"):
        PoseMetric().process([], _samples())


@pytest.mark.openmmlab
def test_pose_metric_dataset_meta_disagreeing_with_meta_is_an_error():
    metric = PoseMetric(meta="keypoints308")
    with pytest.raises(ValueError, match="meta='keypoints308' .*disagrees with the dataset's dataset_meta"):
        metric.dataset_meta = _mmpose_meta("coco")
    same = PoseMetric(meta="coco17")
    same.dataset_meta = _mmpose_meta("ochuman")  # OCHuman has COCO's 17 names: agrees
    assert same.evaluator.meta.name == "coco17"
    with pytest.raises(ValueError, match="other names"):
        PoseMetric(meta="coco17").dataset_meta = {
            "keypoints": [f"k{i}" for i in range(17)],
            "sigmas": [0.05] * 17,
        }
