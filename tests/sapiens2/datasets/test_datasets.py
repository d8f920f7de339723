"""Readers on hand-made real-format samples, the UDP crop, collate, the registry and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from sapiens2.datasets import (
    AlbedoDataset,
    DatasetError,
    NormalDataset,
    PointmapDataset,
    PoseTopdownDataset,
    SegDataset,
    collate,
)
from sapiens2.datasets.io import exr_supported
from sapiens2.datasets.pose import apply_affine
from sapiens2.registry import DATASETS

H, W = 12, 10


def _img(rng):
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8)


def _manifest(root, task, records):
    path = root / f"{task}.json"
    path.write_text(json.dumps({"task": task, "format_version": 1, "records": records}))
    return path


@pytest.fixture
def tiny(tmp_path):
    """One image with every ground truth, in the formats other tools write."""
    rng = np.random.default_rng(0)
    img = _img(rng)
    Image.fromarray(img).save(tmp_path / "a.jpg", quality=100)
    Image.fromarray(img).save(tmp_path / "a.png")
    label = rng.integers(0, 29, (H, W)).astype(np.uint8)
    label[0, 0] = 255
    Image.fromarray(label).save(tmp_path / "label.png")
    mask = np.zeros((H, W), bool)
    mask[2:9, 3:8] = True
    Image.fromarray((mask * 255).astype(np.uint8)).save(tmp_path / "mask.png")
    n = rng.normal(size=(H, W, 3)).astype(np.float32)
    n /= np.linalg.norm(n, axis=2, keepdims=True)
    np.save(tmp_path / "normal.npy", n)
    pts = np.concatenate([rng.normal(size=(H, W, 2)), rng.uniform(1, 3, (H, W, 1))], axis=2).astype(
        np.float32
    )
    np.save(tmp_path / "points.npy", pts)
    alb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    Image.fromarray(alb).save(tmp_path / "albedo.png")
    return {
        "root": tmp_path,
        "img": img,
        "label": label,
        "mask": mask,
        "normal": n,
        "points": pts,
        "albedo": alb,
    }


def test_seg_reads_label_png(tiny):
    ds = SegDataset(_manifest(tiny["root"], "seg", [{"id": "a", "image": "a.png", "label": "label.png"}]))
    s = ds[0]
    assert s["image"].shape == (3, H, W) and s["image"].dtype == torch.float32
    np.testing.assert_allclose(s["image"].permute(1, 2, 0).numpy() * 255, tiny["img"], atol=1e-3)
    assert s["label"].dtype == torch.int64
    np.testing.assert_array_equal(s["label"].numpy(), tiny["label"])
    assert s["index"] == 0 and s["id"] == "a"


def test_seg_reads_palette_png(tmp_path, tiny):
    pal = Image.fromarray(tiny["label"]).convert("P")
    pal.putpalette([v for i in range(256) for v in (i, 255 - i, 0)])
    pal.save(tmp_path / "pal.png")
    ds = SegDataset(
        _manifest(tmp_path, "seg", [{"id": "a", "image": str(tiny["root"] / "a.png"), "label": "pal.png"}])
    )
    np.testing.assert_array_equal(ds[0]["label"].numpy(), tiny["label"])


def test_normal_npy_png16_and_exr(tiny):
    root = tiny["root"]
    n = tiny["normal"]
    enc = np.round((n + 1) / 2 * 65535).astype(np.uint16)
    import cv2
    cv2.imwrite(str(root / "normal16.png"), enc[..., ::-1])
    recs = [
        {"id": "npy", "image": "a.png", "normal": "normal.npy", "mask": "mask.png"},
        {"id": "png", "image": "a.png", "normal": "normal16.png", "mask": "mask.png"},
    ]
    if exr_supported():
        assert cv2.imwrite(str(root / "normal.exr"), n[..., ::-1].copy())
        recs.append({"id": "exr", "image": "a.png", "normal": "normal.exr", "mask": "mask.png"})
    else:
        print("OpenEXR not available in OpenCV: .exr normals not tested")
    ds = NormalDataset(_manifest(root, "normal", recs))
    m = tiny["mask"]
    for i, rec in enumerate(recs):
        s = ds[i]
        assert s["mask"].dtype == torch.bool
        np.testing.assert_array_equal(s["mask"].numpy(), m)
        got = s["normal"].permute(1, 2, 0).numpy()
        tol = 1e-4 if rec["id"] == "png" else 1e-6
        np.testing.assert_allclose(got[m], n[m], atol=tol, err_msg=rec["id"])
        assert (got[~m] == 0).all()


def test_pointmap_canonicalisation_and_intrinsics_forms(tiny):
    root = tiny["root"]
    K = [[300.0, 0, 4.5], [0, 310.0, 5.5], [0, 0, 1]]
    np.save(root / "K.npy", np.array(K))
    recs = [
        {"id": "inline", "image": "a.png", "pointmap": "points.npy", "mask": "mask.png", "K": K},
        {
            "id": "vec",
            "image": "a.png",
            "pointmap": "points.npy",
            "mask": "mask.png",
            "K": [300.0, 310.0, 4.5, 5.5],
        },
        {"id": "file", "image": "a.png", "pointmap": "points.npy", "mask": "mask.png", "K": "K.npy"},
    ]
    ds = PointmapDataset(_manifest(root, "pointmap", recs))
    m = tiny["mask"]
    for i in range(3):
        s = ds[i]
        np.testing.assert_allclose(s["K"].numpy(), np.array(K), rtol=1e-6)
        pts = s["pointmap"].permute(1, 2, 0).numpy()
        np.testing.assert_allclose(pts[m], tiny["points"][m], rtol=1e-6)
        assert s["canonical_scale"] == pytest.approx(768.0 / 300.0)
        np.testing.assert_allclose(
            s["pointmap_canonical"].numpy(), s["pointmap"].numpy() * 768.0 / 300.0, rtol=1e-5
        )


def test_albedo_8_and_16_bit(tiny):
    root = tiny["root"]
    recs = [{"id": "8", "image": "a.png", "albedo": "albedo.png", "mask": "mask.png"}]
    try:
        import cv2

        cv2.imwrite(str(root / "albedo16.png"), (tiny["albedo"].astype(np.uint16) * 257)[..., ::-1].copy())
        recs.append({"id": "16", "image": "a.png", "albedo": "albedo16.png"})
    except ImportError:
        print("opencv missing: 16-bit albedo PNG not tested")
    ds = AlbedoDataset(_manifest(root, "albedo", recs))
    for i in range(len(recs)):
        s = ds[i]
        np.testing.assert_allclose(s["albedo"].permute(1, 2, 0).numpy(), tiny["albedo"] / 255.0, atol=1e-6)
    assert ds[0]["mask"].numpy().sum() == tiny["mask"].sum()
    if len(recs) == 2:
        assert ds[1]["mask"].all()  # no mask given: every pixel


def _coco(root, kps_per_ann=308, names=308, size=(40, 30)):
    img = np.zeros(size + (3,), np.uint8)
    img[20, 10] = [255, 0, 0]  # a marked pixel at keypoint 0
    Image.fromarray(img).save(root / "p.png")
    kps = np.zeros((kps_per_ann, 3))
    kps[0] = [10, 20, 2]
    kps[1] = [15, 25, 1]
    return {
        "images": [{"id": 7, "file_name": "p.png", "height": size[0], "width": size[1]}],
        "annotations": [
            {
                "id": 3,
                "image_id": 7,
                "category_id": 1,
                "bbox": [5, 10, 14, 20],
                "area": 100,
                "iscrowd": 0,
                "keypoints": kps.reshape(-1).tolist(),
            }
        ],
        "categories": [{"id": 1, "name": "person", "keypoints": [f"k{i}" for i in range(names)]}],
    }


def test_pose_udp_crop(tmp_path):
    (tmp_path / "pose.json").write_text(json.dumps(_coco(tmp_path)))
    ds = PoseTopdownDataset(tmp_path / "pose.json", input_size=(48, 64))
    s = ds[0]
    assert s["image"].shape == (3, 64, 48) and s["id"] == "7_3"
    crop = s["crop"]
    # box centre (12, 20) -> crop centre; box 14x20 widened to 15x20 (aspect 0.75), padded 1.25
    np.testing.assert_allclose(crop["center"].numpy(), [12, 20])
    np.testing.assert_allclose(crop["scale"].numpy(), [18.75, 25.0])
    c = apply_affine(np.array([[12.0, 20.0]]), crop["affine"].numpy())
    np.testing.assert_allclose(c, [[23.5, 31.5]], atol=1e-9)
    k = s["keypoints"].numpy()
    back = apply_affine(k.astype(np.float64), crop["inv_affine"].numpy())
    np.testing.assert_allclose(back[:2], [[10, 20], [15, 25]], atol=1e-4)
    assert s["visibility"][:2].tolist() == [2, 1]
    # the marked pixel lands where the keypoint maps to
    red = s["image"][0].numpy()
    y, x = np.unravel_index(np.argmax(red), red.shape)
    assert abs(x - k[0, 0]) <= 1.5 and abs(y - k[0, 1]) <= 1.5
    b = collate([s, ds[0]])
    assert b["image"].shape == (2, 3, 64, 48) and b["crop"]["affine"].shape == (2, 2, 3)
    assert b["id"] == ["7_3", "7_3"] and b["index"].tolist() == [0, 0]


def test_registry_builds_readers(tiny):
    path = _manifest(tiny["root"], "seg", [{"id": "a", "image": "a.png", "label": "label.png"}])
    ds = DATASETS.build(dict(type="SegDataset", ann_file=str(path)))
    assert isinstance(ds, SegDataset) and len(ds) == 1
    for name in ("PoseTopdownDataset", "NormalDataset", "PointmapDataset", "AlbedoDataset"):
        assert DATASETS.get(name) is not None


def test_bad_keypoint_count_names_file_and_record(tmp_path):
    (tmp_path / "pose.json").write_text(json.dumps(_coco(tmp_path, kps_per_ann=17)))
    with pytest.raises(DatasetError, match=r"annotation 3 .*pose\.json.*17 keypoints, expected 308"):
        PoseTopdownDataset(tmp_path / "pose.json")
    (tmp_path / "pose2.json").write_text(json.dumps(_coco(tmp_path, names=133)))
    with pytest.raises(DatasetError, match=r"pose2\.json.*133 keypoint names, expected 308"):
        PoseTopdownDataset(tmp_path / "pose2.json")


def test_pose_image_size_mismatch(tmp_path):
    coco = _coco(tmp_path)
    coco["images"][0]["height"] = 41
    (tmp_path / "pose.json").write_text(json.dumps(coco))
    with pytest.raises(DatasetError, match=r"p\.png.*image_id 7.*\(40, 30\).*\(41, 30\)"):
        PoseTopdownDataset(tmp_path / "pose.json")[0]


def test_missing_and_unreadable_files(tiny):
    root = tiny["root"]
    with pytest.raises(DatasetError, match=r"nope\.png \(record 'a' of .*seg\.json\): label file not found"):
        SegDataset(_manifest(root, "seg", [{"id": "a", "image": "a.png", "label": "nope.png"}]))
    (root / "junk.png").write_bytes(b"not an image")
    ds = SegDataset(_manifest(root, "seg", [{"id": "b", "image": "junk.png", "label": "label.png"}]))
    with pytest.raises(DatasetError, match=r"junk\.png \(record 'b' .*unreadable"):
        ds[0]
    (root / "junk.npy").write_bytes(b"garbage")
    ds = NormalDataset(_manifest(root, "normal", [{"id": "c", "image": "a.png", "normal": "junk.npy"}]))
    with pytest.raises(DatasetError, match=r"junk\.npy \(record 'c' .*unreadable \.npy"):
        ds[0]


def test_size_mismatch_and_bad_values(tiny):
    root = tiny["root"]
    np.save(root / "small.npy", np.ones((H - 1, W, 3), np.float32))
    ds = NormalDataset(_manifest(root, "normal", [{"id": "s", "image": "a.png", "normal": "small.npy"}]))
    with pytest.raises(
        DatasetError, match=r"small\.npy \(record 's'.*normal map size \(11, 10\) differs .*\(12, 10\)"
    ):
        ds[0]
    bad = tiny["label"].copy()
    bad[1, 1] = 40
    Image.fromarray(bad).save(root / "bad.png")
    ds = SegDataset(_manifest(root, "seg", [{"id": "l", "image": "a.png", "label": "bad.png"}]))
    with pytest.raises(DatasetError, match=r"bad\.png \(record 'l'.*\[40\] outside 0\.\.28"):
        ds[0]
    ds = PointmapDataset(
        _manifest(
            root,
            "pointmap",
            [{"id": "k", "image": "a.png", "pointmap": "points.npy", "K": [[0, 0, 1], [0, 1, 0], [0, 0, 1]]}],
        )
    )
    with pytest.raises(DatasetError, match=r"record 'k'.*positive focal"):
        ds[0]


def test_malformed_manifests(tmp_path):
    (tmp_path / "m.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"m\.json: malformed JSON"):
        SegDataset(tmp_path / "m.json")
    _manifest(tmp_path, "normal", [])
    with pytest.raises(DatasetError, match=r"normal\.json: manifest is for task 'normal', expected 'seg'"):
        SegDataset(tmp_path / "normal.json")
    p = _manifest(tmp_path, "seg", [{"id": "x", "image": "a.png"}])
    with pytest.raises(DatasetError, match=r"record 'x'.*lacks \['label'\]"):
        SegDataset(p)
    p = _manifest(
        tmp_path, "seg", [{"id": "x", "image": "a", "label": "b"}, {"id": "x", "image": "a", "label": "b"}]
    )
    with pytest.raises(DatasetError, match="duplicate record id"):
        SegDataset(p, check_files=False)
