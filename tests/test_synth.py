"""Synthetic renderer: determinism, exact geometry, round trips through every reader, cache, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import ndimage

from sapiens2.datasets import collate, open_split
from sapiens2.datasets.pose import apply_affine
from sapiens2.datasets.synth import ensure_default_split, generate_split, synth_sample
from sapiens2.reference import keypoints308, seg_classes29

HW = (128, 96)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return generate_split(tmp_path_factory.mktemp("synth") / "s", n=3, seed=5, size=HW, progress=False)


def test_deterministic_per_seed_and_index():
    a, b = synth_sample(3, 1, HW), synth_sample(3, 1, HW)
    for key in ("image", "label", "normal", "pointmap", "albedo", "mask"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert [p["bbox"] for p in a["people"]] == [p["bbox"] for p in b["people"]]
    c = synth_sample(4, 1, HW)
    assert not np.array_equal(a["image"], c["image"])


def test_geometry_is_consistent():
    for i in range(2):
        s = synth_sample(11, i, HW)
        m = s["mask"]
        assert m.sum() > 200, "a person should cover some pixels"
        np.testing.assert_array_equal(m, s["label"] > 0)
        n, p, K = s["normal"], s["pointmap"], s["K"]
        np.testing.assert_allclose(np.linalg.norm(n[m], axis=1), 1.0, atol=1e-5)
        assert (p[m][:, 2] > 0).all() and (n[~m] == 0).all() and (p[~m] == 0).all()
        # every point projects back to its own pixel centre
        v, u = np.nonzero(m)
        pts = p[m].astype(np.float64)
        np.testing.assert_allclose(K[0, 0] * pts[:, 0] / pts[:, 2] + K[0, 2], u, atol=2e-3)
        np.testing.assert_allclose(K[1, 1] * pts[:, 1] / pts[:, 2] + K[1, 2], v, atol=2e-3)
        # normals face the camera
        assert ((n[m] * pts).sum(axis=1) < 1e-6).all()
        assert set(np.unique(s["label"])) <= set(range(seg_classes29()["num_classes"]))


def test_keypoints_visibility_and_vocabulary():
    kp = keypoints308()
    on_person = total = 0
    for i in range(3):
        s = synth_sample(21, i, HW)
        for person in s["people"]:
            k = person["keypoints"]
            assert k.shape == (kp["num_keypoints"], 3)
            assert set(np.unique(k[:, 2])) <= {0, 1, 2}
            vis = k[:, 2] == 2
            u, v = np.round(k[vis, 0]).astype(int), np.round(k[vis, 1]).astype(int)
            near = ndimage.binary_dilation(s["mask"], iterations=1)  # sub-pixel features at silhouettes
            on_person += int(near[v, u].sum())
            total += int(vis.sum())
            assert (k[k[:, 2] == 0, :2] == 0).all()
    assert total > 100
    assert on_person / total > 0.97, (
        f"only {on_person}/{total} visible keypoints lie on or next to a person pixel"
    )


def test_readers_round_trip_synth(split):
    info = json.loads((split / "split.json").read_text())
    assert info["n"] == 3 and info["size"] == list(HW)
    truth = [synth_sample(5, i, HW) for i in range(3)]
    seg, nrm = open_split(split, "seg"), open_split(split, "normal")
    pm, alb = open_split(split, "pointmap"), open_split(split, "albedo")
    for i, t in enumerate(truth):
        np.testing.assert_array_equal(seg[i]["label"].numpy(), t["label"])
        np.testing.assert_array_equal(seg[i]["image"].permute(1, 2, 0).numpy(), t["image"] / np.float32(255))
        m = t["mask"]
        np.testing.assert_array_equal(nrm[i]["mask"].numpy(), m)
        np.testing.assert_allclose(nrm[i]["normal"].permute(1, 2, 0).numpy()[m], t["normal"][m], atol=1e-6)
        np.testing.assert_array_equal(pm[i]["pointmap"].permute(1, 2, 0).numpy(), t["pointmap"])
        np.testing.assert_allclose(pm[i]["K"].numpy(), t["K"], rtol=1e-6)
        assert pm[i]["canonical_scale"] == pytest.approx(768.0 / t["K"][0, 0])
        np.testing.assert_allclose(alb[i]["albedo"].permute(1, 2, 0).numpy(), t["albedo"] / 255.0, atol=1e-6)
    pose = open_split(split, "pose", input_size=(96, 128))
    people = [(i, p) for i, t in enumerate(truth) for p in t["people"] if (p["keypoints"][:, 2] > 0).any()]
    assert len(pose) == len(people)
    for j, (i, p) in enumerate(people):
        s = pose[j]
        assert s["image_id"] == i and s["image"].shape == (3, 128, 96)
        np.testing.assert_array_equal(s["visibility"].numpy(), p["keypoints"][:, 2].astype(np.int64))
        lab = p["keypoints"][:, 2] > 0
        back = apply_affine(s["keypoints"].numpy().astype(np.float64), s["crop"]["inv_affine"].numpy())
        np.testing.assert_allclose(back[lab], p["keypoints"][lab, :2], atol=2e-3)
    batch = collate([pose[0], pose[len(pose) - 1]])
    assert batch["keypoints"].shape == (2, 308, 2)


def test_splits_of_different_size_share_images(tmp_path, split):
    other = generate_split(tmp_path / "two", n=2, seed=5, size=HW, progress=False)
    for sub in ("images/000001.png", "seg/000001.png", "normal/000001.npy"):
        assert (other / sub).read_bytes() == (split / sub).read_bytes(), sub


def test_ensure_default_split_caches_atomically(tmp_path):
    out = ensure_default_split("t", n=2, size=HW, seed=1, root=tmp_path, progress=False)
    assert (out / "split.json").is_file() and out.name.startswith("t-")
    stamp = (out / "split.json").stat().st_mtime_ns
    again = ensure_default_split("t", n=2, size=HW, seed=1, root=tmp_path, progress=False)
    assert again == out and (out / "split.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [out.name], "no temporary folders left behind"
    assert ensure_default_split("t", n=2, size=HW, seed=2, root=tmp_path, progress=False) != out


def test_cli_synth_and_show(tmp_path):
    from benchmarks.cli.main import main

    out = tmp_path / "cli"
    assert main(["data", "synth", "--out", str(out), "--n", "2", "--seed", "0", "--size", "128x96"]) == 0
    assert main(["data", "synth", "--out", str(out), "--n", "2"]) == 1  # exists: clean error
    png = tmp_path / "sheet.png"
    assert main(["data", "show", str(out), "--out", str(png), "--n", "2", "--tile-height", "128"]) == 0
    from PIL import Image

    with Image.open(png) as im:
        assert im.size[1] == 24 + 2 * 128 and im.size[0] > 4 * 96
    assert main(["data", "show", str(tmp_path)]) == 1  # not a split: clean error
