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
    from sapiens2.datasets.split import available_tasks
    from sapiens2.datasets.synth import TASK_MANIFESTS
    from sapiens2.tasks import task_names

    info = json.loads((split / "split.json").read_text())
    assert info["n"] == 3 and info["size"] == list(HW)
    # the renderer's tasks are tasks of the table, each with its manifest in the split
    assert set(TASK_MANIFESTS) <= set(task_names()) and info["tasks"] == TASK_MANIFESTS
    assert available_tasks(split) == list(TASK_MANIFESTS)
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


def test_synthetic_manifests_name_their_vocabulary(split, monkeypatch):
    """Like an imported split's: the pose manifest names its keypoint set, the seg manifest its label set."""
    from sapiens2.datasets.synth import writer

    pose_manifest = json.loads((split / "pose.json").read_text())
    assert pose_manifest["keypoint_set"] == "keypoints308"
    assert json.loads((split / "seg.json").read_text())["label_set"] == "sapiens2_29"
    for task in ("normal", "pointmap", "albedo"):  # no vocabulary: nothing named
        assert not {"keypoint_set", "label_set"} & set(json.loads((split / f"{task}.json").read_text()))
    seg = open_split(split, "seg")
    assert seg.label_set_declared and seg.label_set.name == "sapiens2_29"
    assert open_split(split, "pose", input_size=(96, 128)).keypoint_set.name == "keypoints308"
    assert json.loads((split / "split.json").read_text())["manifest_version"] == writer.MANIFEST_VERSION
    # a split cached with the manifests of before (no names, another content hash) is never reused
    key = writer.split_key("default", 4, HW, 0)
    monkeypatch.setattr(writer, "MANIFEST_VERSION", writer.MANIFEST_VERSION - 1)
    assert writer.split_key("default", 4, HW, 0) != key


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
    assert main(["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "2", "--seed", "0",
                 "--size", "128x96"]) == 0
    # exists: a clean error
    assert main(["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "2"]) == 1
    png = tmp_path / "sheet.png"
    assert main(["data", "show", str(out), "--out", str(png), "--n", "2", "--tile-height", "128"]) == 0
    from PIL import Image

    with Image.open(png) as im:
        assert im.size[1] > 24 + 2 * 128 and im.size[0] > 6 * 96  # rows, legend footer; 6 columns
    assert main(["data", "show", str(tmp_path)]) == 1  # not a split: clean error


SMALL = (64, 48)


def _leftovers(folder, keep):
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def test_folder_created_while_rendering_is_not_wiped(tmp_path, monkeypatch):
    from sapiens2.datasets.synth import writer

    out = tmp_path / "s"
    original = writer._write_manifests

    def someone_else_writes_there(*args, **kw):
        out.mkdir()
        (out / "theirs.txt").write_text("keep me")
        return original(*args, **kw)

    monkeypatch.setattr(writer, "_write_manifests", someone_else_writes_there)
    with pytest.raises(writer.SplitExistsError, match="appeared while the split was rendered"):
        generate_split(out, n=1, size=SMALL, progress=False)
    assert (out / "theirs.txt").read_text() == "keep me" and sorted(p.name for p in out.iterdir()) == [
        "theirs.txt"
    ]
    assert _leftovers(tmp_path, {"s"}) == [], "the discarded split's temporary folder is removed"
    # even an empty folder made meanwhile is not replaced
    out2 = tmp_path / "e"

    def empty_folder_appears(*args, **kw):
        out2.mkdir()
        return original(*args, **kw)

    monkeypatch.setattr(writer, "_write_manifests", empty_folder_appears)
    with pytest.raises(writer.SplitExistsError):
        generate_split(out2, n=1, size=SMALL, progress=False)
    assert list(out2.iterdir()) == []


def test_two_concurrent_runs_cannot_both_succeed(tmp_path, monkeypatch):
    from sapiens2.datasets.synth import writer

    out = tmp_path / "s"
    original = writer._write_manifests
    calls = []

    def second_run_finishes_first(*args, **kw):
        calls.append(1)
        if len(calls) == 1:  # run A is about to finish: run B renders the same --out completely
            generate_split(out, n=2, seed=7, size=SMALL, progress=False)
        return original(*args, **kw)

    monkeypatch.setattr(writer, "_write_manifests", second_run_finishes_first)
    with pytest.raises(writer.SplitExistsError):
        generate_split(out, n=1, seed=3, size=SMALL, progress=False)
    info = json.loads((out / "split.json").read_text())
    assert (info["seed"], info["n"]) == (7, 2), "the run that finished first keeps its output"
    assert len(list((out / "images").iterdir())) == 2
    assert _leftovers(tmp_path, {"s"}) == []


def test_overwrite_replaces_a_split_only(tmp_path):
    from sapiens2.datasets.synth import writer

    out = generate_split(tmp_path / "s", n=1, seed=1, size=SMALL, progress=False)
    generate_split(out, n=2, seed=2, size=SMALL, progress=False, overwrite=True)
    assert json.loads((out / "split.json").read_text())["seed"] == 2
    assert _leftovers(tmp_path, {"s"}) == [], "the replaced split is gone, no temporary folders"
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a synthetic split"):
        generate_split(other, n=1, size=SMALL, progress=False, overwrite=True)
    assert (other / "notes.txt").read_text() == "mine"
    with pytest.raises(writer.SplitExistsError, match="already exists"):
        generate_split(out, n=1, size=SMALL, progress=False)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_split_and_files_respect_umask(tmp_path, umask):
    import os
    import stat

    from sapiens2.utils_io import write_text_atomic

    old = os.umask(umask)
    try:
        out = generate_split(tmp_path / "s", n=1, size=SMALL, progress=False)
        written = write_text_atomic(tmp_path / "report.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    for f in (out / "split.json", out / "seg.json", out / "images" / "000000.png", written):
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask, f


def test_show_never_writes_into_the_split(tmp_path):
    from benchmarks.cli.main import main
    from sapiens2.records.results import dataset_content_hash

    split = generate_split(tmp_path / "s", n=1, size=SMALL, progress=False)
    before = sorted(p.relative_to(split) for p in split.rglob("*"))
    digest = dataset_content_hash(split)
    assert main(["data", "show", str(split), "--n", "1", "--tile-height", "32"]) == 0
    assert (tmp_path / "s_contact_sheet.png").is_file()
    assert sorted(p.relative_to(split) for p in split.rglob("*")) == before
    assert dataset_content_hash(split) == digest
    assert main(["data", "show", str(split), "--out", str(split / "sheet.png")]) == 1
    assert not (split / "sheet.png").exists() and dataset_content_hash(split) == digest
