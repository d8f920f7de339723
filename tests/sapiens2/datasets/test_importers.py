"""``sapiens2-bench data import`` on the real photos of ../shared/real (mmpose's test data), the readers
on what it writes, and the LIP-style label set that used to be read as Sapiens2's 29 classes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sapiens2.datasets import DatasetError, open_split
from sapiens2.datasets.importers import import_dataset

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
SMALL = (48, 64)  # crop (w, h): small, the code path is the same


def _cli(argv, capsys):
    from benchmarks.cli.main import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_import_coco17_pose_and_polygon_person_masks(tmp_path, capsys):
    out = tmp_path / "coco"
    code, text, _ = _cli(
        ["data", "import", "coco", str(REAL / "coco/test_coco.json"), "--out", str(out)], capsys
    )
    assert code == 0 and "keypoint_set coco17" in text and "label_set person2" in text
    raw = json.loads((REAL / "coco/test_coco.json").read_text())
    pose = open_split(out, "pose", input_size=SMALL)
    labelled = [a for a in raw["annotations"] if any(np.reshape(a["keypoints"], (17, 3))[:, 2] > 0)]
    assert pose.keypoint_set.name == "coco17" and len(pose) == len(labelled) < len(raw["annotations"])
    s = pose[0]
    assert s["keypoints"].shape == (17, 2) and s["image"].shape == (3, 64, 48)
    assert Path(s["image_path"]).resolve().parent == (REAL / "coco").resolve()  # points at the user's files
    seg = open_split(out, "seg")
    assert seg.label_set.name == "person2" and seg.class_names == ["Background", "Person"]
    by_image: dict = {}
    for a in raw["annotations"]:
        by_image.setdefault(str(a["image_id"]), []).append(a)
    sizes = set()
    for i in range(len(seg)):
        smp = seg[i]
        lab = smp["label"].numpy()
        sizes.add(lab.shape)
        assert set(np.unique(lab)) <= {0, 1, 255}
        area = sum(a["area"] for a in by_image[smp["id"]])  # people rarely overlap here: union ~ sum
        assert abs((lab == 1).sum() - area) / area < 0.05, (smp["id"], (lab == 1).sum(), area)
    assert len(sizes) > 1  # images of different sizes, read at native size
    assert not any(p.suffix == ".jpg" for p in out.rglob("*"))  # no image copies


def test_import_ochuman_rle_masks(tmp_path):
    out = import_dataset("ochuman", REAL / "ochuman/test_ochuman.json", tmp_path / "och")
    raw = json.loads((REAL / "ochuman/test_ochuman.json").read_text())
    assert all(isinstance(a["segmentation"], dict) for a in raw["annotations"])  # RLE, not polygons
    pose = open_split(out, "pose", input_size=SMALL)
    assert pose.keypoint_set.name == "ochuman17" and pose[0]["keypoints"].shape == (17, 2)
    seg = open_split(out, "seg")
    union = sum(int((seg[i]["label"] == 1).sum()) for i in range(len(seg)))
    assert 0 < union <= sum(a["area"] for a in raw["annotations"]) * 1.01


def test_import_coco_wholebody_distributed_layout_as_133(tmp_path, capsys):
    src = REAL / "coco/test_coco_wholebody.json"
    code, _, err = _cli(["data", "import", "coco", str(src), "--out", str(tmp_path / "as17")], capsys)
    assert code == 1 and "COCO-WholeBody split fields" in err and "coco-wholebody" in err
    assert not (tmp_path / "as17").exists()  # nothing half-written
    out = import_dataset("coco-wholebody", src, tmp_path / "wb")
    pose = open_split(out, "pose", input_size=SMALL)
    assert pose.keypoint_set.name == "coco_wholebody133" and pose.num_keypoints == 133
    raw = json.loads(src.read_text())
    first = next(i for i in range(len(pose)) if pose[i]["ann_id"] == raw["annotations"][0]["id"])
    kimg = pose[first]["keypoints_image"].numpy()
    foot = np.reshape(raw["annotations"][0]["foot_kpts"], (6, 3))
    np.testing.assert_allclose(kimg[17:23], foot[:, :2], atol=1e-4)
    # the reader refuses the split layout when handed the file directly
    with pytest.raises(DatasetError, match="split layout .* data import coco-wholebody"):
        from sapiens2.datasets import PoseTopdownDataset

        PoseTopdownDataset(src, keypoint_set="coco17")


def test_import_mpii_boxes_and_head_sizes(tmp_path):
    from scipy.io import savemat

    raw = json.loads((REAL / "mpii/test_mpii.json").read_text())
    boxes = np.zeros((2, 2, len(raw)))
    boxes[1] = 30.0 + np.arange(len(raw))  # x2 = y2 = 30 + i, x1 = y1 = 0
    savemat(tmp_path / "heads.mat", {"headboxes_src": boxes})
    out = import_dataset(
        "mpii", REAL / "mpii/test_mpii.json", tmp_path / "mpii", headboxes=tmp_path / "heads.mat"
    )
    pose = open_split(out, "pose", input_size=SMALL)
    assert pose.keypoint_set.name == "mpii16" and len(pose) == len(raw)
    s = pose[0]
    r = raw[0]
    np.testing.assert_allclose(s["keypoints_image"].numpy(), np.asarray(r["joints"]) - 1, atol=1e-4)
    side = r["scale"] * 200
    np.testing.assert_allclose(s["bbox"][2:].numpy(), [side, side], rtol=1e-6)
    assert s["head_size"] == pytest.approx(0.6 * np.hypot(30, 30))
    with pytest.raises(DatasetError, match="expected 2 x 2 x 5"):
        savemat(tmp_path / "bad.mat", {"headboxes_src": boxes[:, :, :3]})
        import_dataset("mpii", REAL / "mpii/test_mpii.json", tmp_path / "m2", headboxes=tmp_path / "bad.mat")


def _lip_folder(root: Path, values) -> Path:
    """A LIP-layout folder: two real photos and label PNGs drawn with the given LIP class ids."""
    img_dir, lab_dir = root / "val_images", root / "val_segmentations"
    img_dir.mkdir(parents=True)
    lab_dir.mkdir()
    for name, v in zip(("000000000785", "000000040083"), values):
        src = REAL / "coco" / f"{name}.jpg"
        (img_dir / src.name).symlink_to(src)
        w, h = Image.open(src).size
        lab = np.zeros((h, w), np.uint8)
        lab[h // 4 : h // 2, w // 4 : w // 2] = v
        Image.fromarray(lab, mode="L").save(lab_dir / f"{name}.png")
    return root


def test_lip_labels_are_read_in_lip_classes_not_sapiens2(tmp_path, capsys):
    root = _lip_folder(tmp_path / "LIP", (13, 2))  # 13 = LIP "Face" (Sapiens2 13 = "Lower_Clothing")
    out = tmp_path / "lip"
    code, text, _ = _cli(["data", "import", "lip", str(root), "--out", str(out)], capsys)
    assert code == 0 and "label_set lip20" in text
    seg = open_split(out, "seg")
    assert seg.num_classes == 20 and seg.class_names[13] == "Face"
    sample = next(seg[i] for i in range(len(seg)) if seg[i]["id"] == "000000000785")
    assert 13 in np.unique(sample["label"].numpy())
    # a LIP value outside the 20 classes is refused at import, naming the file
    bad = _lip_folder(tmp_path / "LIPbad", (13, 25))
    with pytest.raises(DatasetError, match="000000040083.png.*outside 0..19"):
        import_dataset("lip", bad, tmp_path / "lipbad")
    # the seg evaluator names LIP's classes from the label set
    from evaluators.seg import SegEvaluator

    ev = SegEvaluator(label_set=seg.label_set)
    lab = sample["label"][None]
    ev.update(lab, lab)
    res = ev.compute()
    assert res["per_class"]["IoU"]["Face"] == 1.0 and res["conventions"]["label_set"] == "lip20"


def test_undeclared_manifest_with_values_outside_29_says_to_declare_a_label_set(tmp_path):
    out = import_dataset("lip", _lip_folder(tmp_path / "L", (13, 2)), tmp_path / "lip")
    m = json.loads((out / "seg.json").read_text())
    lab = np.array(Image.open(m["records"][0]["label"]))
    lab[0, 0] = 40
    p = tmp_path / "l40.png"
    Image.fromarray(lab, mode="L").save(p)
    m["records"][0]["label"] = str(p)
    del m["label_set"]
    (tmp_path / "undeclared.json").write_text(json.dumps(m))
    from sapiens2.datasets import SegDataset

    ds = SegDataset(tmp_path / "undeclared.json")
    assert ds.label_set.name == "sapiens2_29"
    with pytest.raises(DatasetError, match='names no label_set.*"label_set"'):
        ds[0]
    with pytest.raises(DatasetError, match="disagrees with label set lip20"):
        SegDataset(out / "seg.json", num_classes=29)


def test_parts_needs_a_label_set_and_existing_split_is_kept(tmp_path):
    root = _lip_folder(tmp_path / "P", (1, 2))
    with pytest.raises(DatasetError, match="--label-set"):
        import_dataset("parts", root, tmp_path / "x", images="val_images", labels="val_segmentations")
    out = import_dataset(
        "parts",
        root,
        tmp_path / "x",
        images="val_images",
        labels="val_segmentations",
        label_set="pascal_person_part7",
    )
    assert open_split(out, "seg").class_names[1] == "Head"
    from sapiens2.datasets.synth.writer import SplitExistsError

    with pytest.raises(SplitExistsError):
        import_dataset("lip", root, out)


def test_coco_person_masks_from_an_instances_file(tmp_path):
    raw = json.loads((REAL / "coco/test_coco.json").read_text())
    anns = [{k: a[k] for k in ("id", "image_id", "category_id", "iscrowd", "segmentation", "area", "bbox")}
            for a in raw["annotations"]]  # fmt: skip
    dog = {**anns[0], "id": 10**9, "category_id": 18}  # another category's mask is not a person
    inst = {"images": raw["images"], "annotations": [*anns, dog],
            "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}]}  # fmt: skip
    (tmp_path / "instances.json").write_text(json.dumps(inst))
    out = import_dataset("coco-person-masks", tmp_path / "instances.json", tmp_path / "m",
                         images=REAL / "coco")  # fmt: skip
    info = json.loads((out / "split.json").read_text())
    assert list(info["tasks"]) == ["seg"] and info["label_set"] == "person2"
    ref = import_dataset("coco", REAL / "coco/test_coco.json", tmp_path / "ref")
    for name in (out / "seg").iterdir():
        a, b = np.array(Image.open(name)), np.array(Image.open(ref / "seg" / name.name))
        np.testing.assert_array_equal(a, b)
    inst["categories"] = [{"id": 18, "name": "dog"}]
    (tmp_path / "nodog.json").write_text(json.dumps(inst))
    with pytest.raises(DatasetError, match="no category named 'person'"):
        import_dataset("coco-person-masks", tmp_path / "nodog.json", tmp_path / "n", images=REAL / "coco")


def test_eval_seg_scores_29_class_label_maps_on_person_masks(tmp_path, capsys):
    out = import_dataset("coco", REAL / "coco/test_coco.json", tmp_path / "coco")
    pred = tmp_path / "pred"
    pred.mkdir()
    for p in (out / "seg").iterdir():
        gt = np.array(Image.open(p))
        lab = np.where(gt == 1, 23, 0).astype(np.uint8)  # Upper_Clothing on every person pixel
        lab[gt == 255] = 4
        Image.fromarray(lab, mode="L").save(pred / p.name)
    base = ["eval", "seg", "--pred", str(pred), "--gt", str(out / "seg"), "--label-set", "person2"]
    code, _, err = _cli(base, capsys)
    assert code == 1 and "outside 0..1" in err  # 29-class predictions are not person/background labels
    js = tmp_path / "m.json"
    code, _, _ = _cli([*base, "--pred-label-set", "sapiens2_29", "--json", str(js)], capsys)
    assert code == 0
    res = json.loads(js.read_text())
    assert res["metrics"]["mIoU"] == pytest.approx(100.0) and res["conventions"]["label_set"] == "person2"
    assert res["per_class"]["IoU"]["Person"] == pytest.approx(1.0)
    code, _, err = _cli([*base, "--num-classes", "29"], capsys)
    assert code == 1 and "disagrees with --label-set person2" in err
