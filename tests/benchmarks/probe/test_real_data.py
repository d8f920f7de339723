"""The probe on real photos (../shared/real, imported with ``data import``) and on any vocabulary and
image size: pose sized from COCO-17 / COCO-WholeBody-133, person-mask seg, images of several sizes,
records that name their vocabulary, and the warning on too few test images."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from _probe_toy import _scene

from benchmarks.probe.api import MIN_INTERVAL_IMAGES, run_probe
from benchmarks.probe.data.source import MemoryData
from benchmarks.probe.protocol import quick_protocol
from benchmarks.probe.tasks import build_task
from sapiens2.datasets.importers import import_dataset
from sapiens2.records.schema import validate
from sapiens2.vocab import keypoint_set

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
needs_real = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails


def _records(paths):
    return {json.loads(p.read_text())["task"]: json.loads(p.read_text()) for p in paths}


def _check_named(rec: dict, kind: str, name: str) -> None:
    """The record names its vocabulary in its dataset entry, its config and its protocol (hence its id)."""
    task = rec["task"]
    assert rec["dataset"]["vocabulary"] == {kind: name}
    assert rec["config"]["vocabulary"] == {kind: name}
    assert rec["config"]["protocol"]["tasks"][task][kind] == name
    assert rec["protocol"]["protocol_id"] != quick_protocol().protocol_id(task)  # the id covers it
    assert validate(rec) == []


@pytest.mark.slow
@needs_real
def test_probe_pose_coco17_and_person_mask_seg_on_real_photos(tmp_path, capsys):
    data = import_dataset("coco", REAL / "coco/test_coco.json", tmp_path / "coco")
    recs = _records(run_probe("pixels", ["pose", "seg"], data, tmp_path / "out", protocol="quick"))
    pose, seg = recs["pose"], recs["seg"]
    _check_named(pose, "keypoint_set", "coco17")
    _check_named(seg, "label_set", "person2")
    assert seg["metrics"]["mIoU"] is not None and 0 <= seg["metrics"]["mIoU"] <= 100
    assert 0 <= pose["metrics"]["AP"] <= 1
    assert pose["metrics"]["num_samples"] == pose["dataset"]["num_samples"]
    # the record says where the OKS area and the PCK / EPE box come from (COCO has areas and boxes)
    assert pose["conventions"]["gt_area"] == "the split's 'area' (the source's own)"
    assert pose["conventions"]["pck_box"].startswith("the annotation box")
    # 4 photos: far too few test images for an interval; said in the terminal and in every record
    err = capsys.readouterr().err
    for rec in (pose, seg):
        n = rec["intervals"]["n"]
        assert n < MIN_INTERVAL_IMAGES and f"only {n} {rec['task']} test image(s)" in rec["notes"]
        assert f"probe pixels {rec['task']} seed 0: WARNING: only {n}" in err


@pytest.mark.slow
@needs_real
def test_probe_wholebody133_pose_with_a_shipped_backbone_scores_every_part(tmp_path):
    data = import_dataset("coco-wholebody", REAL / "coco/test_coco_wholebody.json", tmp_path / "wb")
    rec = _records(run_probe("sapiens2_cpu_small", ["pose"], data, tmp_path / "out",
                             protocol="quick"))["pose"]
    _check_named(rec, "keypoint_set", "coco_wholebody133")
    assert rec["config"]["backbone"]["type"] != "pixels"
    parts = keypoint_set("coco_wholebody133").parts
    for part in parts:  # per-part AP / PCK / EPE from the set's declared parts
        for m in ("AP", "PCK@0.1", "EPE"):
            assert f"{part}/{m}" in rec["metrics"], (part, m, sorted(rec["metrics"]))


@pytest.mark.slow
@needs_real
def test_probe_ochuman_rle_person_masks_with_a_shipped_backbone(tmp_path):
    data = import_dataset("ochuman", REAL / "ochuman/test_ochuman.json", tmp_path / "och")
    # 3 photos in one folder: every 2nd is the test split (the single-folder hold-out rule)
    protocol = quick_protocol().replace(holdout_every=2)
    rec = _records(run_probe("sapiens2_cpu_small", ["seg"], data, tmp_path / "out", protocol=protocol))["seg"]
    _check_named(rec, "label_set", "person2")
    assert rec["dataset"]["num_samples"] == 1 and rec["config"]["num_train_samples"] == 2
    assert 0 <= rec["metrics"]["aAcc"] <= 100


def _mixed_size_seg(tmp_sizes):
    gen = torch.Generator().manual_seed(0)
    return [_scene(i, size, gen) for i, size in enumerate(tmp_sizes)]


@pytest.mark.slow
def test_seg_probe_on_images_of_different_sizes_scores_each_at_its_native_size(tmp_path):
    train = _mixed_size_seg([(64, 48), (60, 52), (70, 40), (64, 48)])
    test = _mixed_size_seg([(56, 44), (72, 50)])
    data = MemoryData({"seg": {"train": train, "test": test}}, name="mixed")
    # used to crash: torch.stack of the native-size train labels ("stack expects each tensor ...")
    rec = _records(run_probe("pixels", ["seg"], data, tmp_path / "out", protocol="quick"))["seg"]
    assert rec["dataset"]["vocabulary"] == {"label_set": "sapiens2_29"}
    assert rec["protocol"]["protocol_id"] == quick_protocol().protocol_id("seg")  # the default set: same id
    assert rec["metrics"]["mIoU"] is not None

    # the evaluator sees each test label map at its native size: its pixel count is theirs, not N * input
    task = build_task("seg", quick_protocol())
    tgt = task.targets(test)
    assert tuple(tgt["label"].shape[-2:]) == tuple(quick_protocol().input_size)
    ev = task.make_evaluator()
    task.update_evaluator(ev, torch.zeros(2, 29, 16, 12), None, tgt, torch.tensor([0, 1]))
    assert int(ev.state()["confusion"].sum()) == sum(s["label"].numel() for s in test) == 56 * 44 + 72 * 50
    # a sample's train layout depends on it alone, never on its batch: a batch of one 56x44 label map
    # (uniform, but not the input size) gives the very rows of the mixed batch (it was cropped to 64x48)
    alone = task.targets(test[:1])
    assert torch.equal(alone["label"][0], tgt["label"][0]) and alone["native_size"].tolist() == [[56, 44]]
    # maps at the input size are kept as they are
    at_input = _mixed_size_seg([(64, 48), (64, 48)])
    same = task.targets(at_input)
    assert set(same) == {"label"} and torch.equal(same["label"][1], at_input[1]["label"])


DENSE = ("normal", "pointmap", "albedo")


def _direct_update(name: str, ev, maps: torch.Tensor, s: dict, index: torch.Tensor) -> None:
    """The evaluator called by hand on one sample's native GT (the task's own prediction rule)."""
    import torch.nn.functional as F

    mask = torch.as_tensor(s["mask"]).bool()[None]
    if name == "normal":
        ev.update(F.normalize(maps.float(), dim=1, eps=1e-6), s["normal"][None].float(), mask, index=index)
    elif name == "albedo":
        pred = F.interpolate(maps.float(), size=mask.shape[-2:], mode="bilinear", align_corners=False)
        ev.update(pred.clamp(0, 1), s["albedo"][None].float(), mask, index=index)
    else:
        pc = s["pointmap"].float() * (768.0 / float(s["K"][0, 0]))
        m = mask & torch.isfinite(pc).all(0) & (pc[2] > 0)
        pred = F.interpolate(maps.float(), size=mask.shape[-2:], mode="bilinear", align_corners=False)
        ev.update(pred * m[:, None], torch.where(m, pc, 0)[None], m, index=index)


@pytest.mark.slow
@pytest.mark.parametrize("name", DENSE)
def test_dense_probe_on_images_of_different_sizes_scores_each_at_its_native_size(tmp_path, name):
    train = _mixed_size_seg([(64, 48), (60, 52), (70, 40), (64, 48)])
    test = _mixed_size_seg([(56, 44), (72, 50), (64, 48)])
    data = MemoryData({name: {"train": train, "test": test}}, name="mixed")
    # used to be refused by name ("the normal probe takes images of one size")
    rec = _records(run_probe("pixels", [name], data, tmp_path / "out", protocol="quick"))[name]
    assert rec["dataset"]["num_samples"] == 3 and validate(rec) == []
    assert all(v is None or v == v for v in rec["metrics"].values() if isinstance(v, float))

    task = build_task(name, quick_protocol())
    tgt = task.targets(test)
    size = tuple(quick_protocol().input_size)
    assert tuple(tgt[name].shape[-2:]) == size and tuple(tgt["mask"].shape[-2:]) == size  # the train layout
    assert tgt["native_size"].tolist() == [[56, 44], [72, 50], [64, 48]]
    maps = torch.randn(3, 3, *size, generator=torch.Generator().manual_seed(0))
    index = torch.tensor([0, 1, 2])
    for i, s in enumerate(test):  # each test GT scored at its native size = the evaluator called on it
        one = torch.tensor([i])
        via_task, direct = task.make_evaluator(), task.make_evaluator()
        task.update_evaluator(via_task, maps[one], None, {k: v[one] for k, v in tgt.items()}, index[one])
        _direct_update(name, direct, maps[one], s, index[one])
        assert via_task.compute() == direct.compute(), (name, i)
    whole, direct = task.make_evaluator(), task.make_evaluator()
    task.update_evaluator(whole, maps, None, tgt, index)
    for i, s in enumerate(test):
        _direct_update(name, direct, maps[i : i + 1], s, index[i : i + 1])
    assert whole.compute() == direct.compute()
    # a sample's train layout depends on it alone, never on its batch (the streamed probe's batches)
    alone = task.targets(test[:1])
    assert torch.equal(alone[name][0], tgt[name][0]) and torch.equal(alone["mask"][0], tgt["mask"][0])
    at_input = task.targets(test[2:])  # the 64x48 map: kept as it is, in a batch of its own or not
    assert "native_size" not in at_input and torch.equal(at_input[name][0], tgt[name][2])


def test_train_layout_resizes_masked_maps_without_leaking_the_background():
    from benchmarks.probe.tasks.base import resize_masked

    mask = torch.zeros(40, 30, dtype=torch.bool)
    mask[5:30, 8:25] = True
    values = torch.full((3, 40, 30), float("nan"))  # off the mask: anything, here NaN
    values[:, mask] = torch.tensor([0.2, -0.5, 0.7])[:, None]
    out, keep = resize_masked(values, mask, (16, 12))
    assert keep.any() and not keep.all() and torch.isfinite(out).all()
    want = torch.tensor([0.2, -0.5, 0.7])[:, None].expand(3, int(keep.sum()))
    torch.testing.assert_close(out[:, keep], want)
    assert (out[:, ~keep] == 0).all()
    normal = build_task("normal", quick_protocol()).targets(_mixed_size_seg([(64, 48), (60, 52)]))
    norms = normal["normal"].norm(dim=1)
    torch.testing.assert_close(norms[normal["mask"]], torch.ones(int(normal["mask"].sum())))


def test_vocabulary_enters_the_protocol_id_only_when_not_the_default():
    p = quick_protocol()
    assert "keypoint_set" not in p.task_protocol("pose")["tasks"]["pose"]  # default ids unchanged
    coco = p.replace(tasks={"pose": {"keypoint_set": "coco17"}})
    assert coco.task_protocol("pose")["tasks"]["pose"]["keypoint_set"] == "coco17"
    assert coco.protocol_id("pose") != p.protocol_id("pose")
    task = build_task("pose", coco)
    assert task.out_channels == 17 and task.make_evaluator().meta.name == "coco17"
    with pytest.raises(ValueError, match="tasks.pose.keypoint_set is 'coco17' but the data's keypoint_set"):
        task.use_vocabulary("keypoints308")
    seg = build_task("seg", p.replace(tasks={"seg": {"label_set": "lip20"}}))
    assert seg.out_channels == 20 and seg.make_evaluator().num_classes == 20


@pytest.mark.slow
def test_memory_data_vocabulary_sizes_the_pose_task(tmp_path):
    gen = torch.Generator().manual_seed(1)
    scenes = [_scene(i, (64, 48), gen) for i in range(6)]
    for s in scenes:  # 17 of the toy's keypoints, as a COCO-17 split
        s["keypoints"], s["visibility"] = s["keypoints"][:17], s["visibility"][:17]
    data = MemoryData({"pose": {"train": scenes[:4], "test": scenes[4:]}}, vocabularies={"pose": "coco17"})
    rec = _records(run_probe("pixels", ["pose"], data, tmp_path / "out", protocol="quick"))["pose"]
    _check_named(rec, "keypoint_set", "coco17")
    # a split whose GT is not in the protocol's set is refused, naming both
    why = "keypoint_set is 'coco17' but the data's keypoint_set is 'keypoints308'"
    other = MemoryData(data.samples, vocabularies={"pose": keypoint_set("keypoints308")})
    with pytest.raises(ValueError, match=why):
        run_probe("pixels", ["pose"], other, tmp_path / "o2",
                  protocol=quick_protocol().replace(tasks={"pose": {"keypoint_set": "coco17"}}))


@pytest.mark.slow
@needs_real
def test_probe_cli_names_the_vocabulary_and_warns_on_few_images(tmp_path, capsys):
    from benchmarks.cli.main import main

    data = import_dataset("coco", REAL / "coco/test_coco.json", tmp_path / "coco")
    argv = ["probe", "--backbone", "pixels", "--tasks", "seg", "--data", str(data), "--quick",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "vocabulary: seg label_set person2" in out.out
    assert "WARNING: only 1 seg test image(s): an interval over fewer than 30 test images" in out.err


def test_few_images_rule_is_fewer_than_30():
    from benchmarks.probe.api import _few_images_warning

    assert MIN_INTERVAL_IMAGES == 30
    assert "only 29 seg test image(s)" in _few_images_warning({"n": 29}, "seg")
    assert _few_images_warning({"n": 30}, "seg") == "" and _few_images_warning({}, "seg") == ""
