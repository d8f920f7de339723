"""The pose probe's ground truth conventions on a real imported split: the OKS area from the split
(``w * h * 0.53`` for sets without ``area``) and the annotation box as PCK / EPE normaliser (mmpose's),
both named in the evaluator's conventions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.probe.protocol import quick_protocol
from benchmarks.probe.tasks import build_task
from sapiens2.datasets.importers import import_dataset
from sapiens2.datasets.split import open_split
from sapiens2.vocab import keypoint_set
from tests.evaluators.pose.test_real_formats import make_format


class _Recorder:
    """Stands in for the evaluator: keeps what ``update`` was given, and a conventions dict."""

    def __init__(self):
        self.conventions, self.calls = {}, []

    def update(self, *args, **kwargs):
        self.calls.append(kwargs)


@pytest.fixture
def crowdpose_split(tmp_path, real_dir):
    cp = keypoint_set("crowdpose14")
    gt = make_format(real_dir, cp.names, cp.names, crowd=True)
    src = tmp_path / "cp.json"
    src.write_text(json.dumps(gt))
    return import_dataset("crowdpose", src, tmp_path / "split", images=real_dir / "coco", masks=False), gt


def test_probe_pose_targets_take_area_and_box_from_the_split(crowdpose_split):
    split, gt = crowdpose_split
    ds = open_split(split, "pose", input_size=(192, 256))
    samples = [ds[i] for i in range(3)]
    by_id = {a["id"]: a for a in gt["annotations"]}
    for s in samples:  # CrowdPose has no area: 0.53 x box, as its official evaluation
        x, y, w, h = by_id[s["ann_id"]]["bbox"]
        assert s["area"] == pytest.approx(w * h * 0.53, rel=1e-12)
        assert s["area_source"].startswith("w * h * 0.53")
    task = build_task("pose", quick_protocol().replace(input_size=(256, 192)))
    task.use_vocabulary(ds.keypoint_set)
    tgt = task.targets(samples)
    for s, box in zip(samples, tgt["box"].numpy()):
        a = np.asarray(s["crop"]["affine"], np.float64)
        x, y, w, h = s["bbox"].double().numpy()
        lo = a @ np.array([x, y, 1.0])
        hi = a @ np.array([x + w, y + h, 1.0])
        assert np.allclose(box, [*lo, *(hi - lo)], atol=1e-6)  # the annotation box, in crop pixels
    rec = _Recorder()
    maps = torch.zeros(len(samples), 14, 64, 48)
    task.update_evaluator(rec, maps, None, tgt, [s["index"] for s in samples])
    given = rec.calls[0]["gt_bboxes"].double().numpy()
    assert np.allclose(given, tgt["box"].numpy(), atol=1e-4)  # not the labelled keypoints' extent
    vis = tgt["visibility"].numpy() > 0
    kp = tgt["keypoints"].numpy()
    extent_w = [np.ptp(k[v][:, 0]) for k, v in zip(kp, vis)]
    assert any(abs(e - g) > 1 for e, g in zip(extent_w, given[:, 2]))
    assert rec.conventions["pck_box"].startswith("the annotation box")
    assert rec.conventions["gt_area"].startswith("w * h * 0.53")


def test_pose_reader_reads_a_file_by_its_listed_names(tmp_path, real_dir):
    """A COCO-style file without keypoint_set is read in the set its names are (AI Challenger here);
    names no built-in set has are read as the declared default (308) and refused for their count,
    never read as a built-in set of that count."""
    from sapiens2.datasets.io import DatasetError
    from sapiens2.datasets.pose import PoseTopdownDataset
    from tests.evaluators.pose.test_real_formats import AIC_SPELLED

    gt = make_format(real_dir, AIC_SPELLED, keypoint_set("aic14").names)
    for im in gt["images"]:
        im["file_name"] = str(real_dir / "coco" / im["file_name"])
    path = tmp_path / "aic.json"
    path.write_text(json.dumps(gt))
    ds = PoseTopdownDataset(path, input_size=(192, 256))
    assert ds.keypoint_set.name == "aic14" and ds.area_source.startswith("w * h * 0.53")
    gt["categories"][0]["keypoints"] = [f"j{i}" for i in range(14)]
    path.write_text(json.dumps(gt))
    with pytest.raises(DatasetError, match=r"lists 14 keypoint names, expected 308.*declare it"):
        PoseTopdownDataset(path, input_size=(192, 256))
