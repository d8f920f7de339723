"""An imported split is identified by every file it reads, also the photos and label PNGs its manifests
name by absolute path: a photo or label changed in place gives a new identity, which the probe's
done-check, sample cache and records (compare's pairing) use."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from sapiens2.datasets import identity
from sapiens2.datasets.identity import referenced_files, split_identity
from sapiens2.datasets.importers import import_dataset
from sapiens2.records.provenance import dataset_content_hash

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
PHOTOS = ("000000000785", "000000040083", "000000196141", "000000197388")
PAST_NS = 1_600_000_000 * 10**9  # a modification time long ago: the digest may be remembered


@pytest.fixture(autouse=True)
def _own_digest_memo(tmp_path, monkeypatch):
    """Each test has its own on-disk memo, and starts with an empty one in memory."""
    monkeypatch.setenv("SAPIENS2_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(identity, "_MEMO", {})
    monkeypatch.setattr(identity, "_DISK", None)


def _coco_copy(tmp_path: Path) -> Path:
    """The real COCO photos and their JSON, copied (the test changes photos in place)."""
    src = tmp_path / "photos"
    shutil.copytree(REAL / "coco", src)
    for p in src.iterdir():
        os.utime(p, ns=(PAST_NS, PAST_NS))
    return src


def _invert(photo: Path) -> None:
    """Colour-invert a photo in place (same path, same inode, same size)."""
    img = np.asarray(Image.open(photo).convert("RGB"))
    Image.fromarray(255 - img).save(photo, format="JPEG", quality=95)


def test_photos_outside_the_split_are_part_of_its_identity(tmp_path):
    src = _coco_copy(tmp_path)
    split = import_dataset("coco", src / "test_coco.json", tmp_path / "split")
    files = referenced_files(split)
    assert {p.name for p in files} >= {f"{n}.jpg" for n in PHOTOS}
    assert all(p.is_absolute() for p in files)
    before, folder = split_identity(split), dataset_content_hash(split)
    assert before != folder  # the photos are not in the folder
    assert split_identity(split) == before  # deterministic
    _invert(src / f"{PHOTOS[0]}.jpg")
    assert dataset_content_hash(split) == folder  # the folder alone did not change...
    assert split_identity(split) != before  # ...but what the split reads did


def test_a_split_without_outside_files_keeps_its_folder_hash(tmp_path):
    src = _coco_copy(tmp_path)
    split = tmp_path / "split"
    import_dataset("coco", src / "test_coco.json", split)
    # move the photos into the split and point the manifest at them by relative path
    (split / "images").mkdir()
    manifest = json.loads((split / "pose.json").read_text())
    for im in manifest["images"]:
        name = Path(im["file_name"]).name
        shutil.copy(im["file_name"], split / "images" / name)
        im["file_name"] = f"images/{name}"
    (split / "pose.json").write_text(json.dumps(manifest))
    for task, rel in json.loads((split / "split.json").read_text())["tasks"].items():
        if task != "pose":
            (split / rel).unlink()  # the seg manifest still names the photos outside
    info = json.loads((split / "split.json").read_text())
    info["tasks"] = {"pose": info["tasks"]["pose"]}
    (split / "split.json").write_text(json.dumps(info))
    assert split_identity(split) == dataset_content_hash(split)


def test_an_unchanged_photo_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch):
    src = _coco_copy(tmp_path)
    split = import_dataset("coco", src / "test_coco.json", tmp_path / "split")
    first = split_identity(split)
    memo = json.loads((tmp_path / "cache" / "file_digests.json").read_text())
    assert len(memo) >= len(PHOTOS)
    # a new process (empty memory) reads no photo: the stamps on disk say they are unchanged
    monkeypatch.setattr(identity, "_MEMO", {})
    monkeypatch.setattr(identity, "_DISK", None)
    opened = []

    def counting_open(path, *args, **kwargs):
        opened.append(Path(path).name)
        return open(path, *args, **kwargs)

    monkeypatch.setattr(identity, "open", counting_open, raising=False)
    assert split_identity(split) == first and not [n for n in opened if n.endswith(".jpg")]
    # same size, same modification time, other bytes: the stamp (change time) still differs
    photo = src / f"{PHOTOS[1]}.jpg"
    data = bytearray(photo.read_bytes())
    data[-10] ^= 0xFF
    photo.write_bytes(bytes(data))
    os.utime(photo, ns=(PAST_NS, PAST_NS))
    assert split_identity(split) != first and f"{PHOTOS[1]}.jpg" in opened


def test_a_zeroed_label_png_changes_the_identity(tmp_path):
    """A LIP-layout import: the manifest names the label PNGs where they are."""
    root = tmp_path / "LIP"
    (root / "val_images").mkdir(parents=True)
    (root / "val_segmentations").mkdir()
    for name in PHOTOS[:2]:
        shutil.copy(REAL / "coco" / f"{name}.jpg", root / "val_images")
        w, h = Image.open(REAL / "coco" / f"{name}.jpg").size
        lab = np.zeros((h, w), np.uint8)
        lab[h // 4 : h // 2, w // 4 : w // 2] = 13
        Image.fromarray(lab, mode="L").save(root / "val_segmentations" / f"{name}.png")
    split = import_dataset("lip", root, tmp_path / "lip")
    labels = [p for p in referenced_files(split) if p.suffix == ".png"]
    assert labels and all(not p.is_relative_to(split.resolve()) for p in labels)
    before = split_identity(split)
    for p in labels:
        Image.fromarray(np.zeros_like(np.asarray(Image.open(p))), mode="L").save(p)
    assert split_identity(split) != before


def test_a_missing_photo_is_named(tmp_path):
    src = _coco_copy(tmp_path)
    split = import_dataset("coco", src / "test_coco.json", tmp_path / "split")
    (src / f"{PHOTOS[2]}.jpg").unlink()
    with pytest.raises(ValueError, match=PHOTOS[2]):
        split_identity(split)


def _probe(split, out, cache=None) -> dict:
    from benchmarks.probe.api import RunOptions, run_probe
    from benchmarks.probe.protocol import quick_protocol

    protocol = quick_protocol().replace(tasks={"seg": {"decoder": "linear"}})
    (path,) = run_probe("pixels", "seg", split, out, protocol=protocol,
                        options=RunOptions(sample_cache=cache))
    return json.loads(Path(path).read_text())


@pytest.mark.slow
def test_probe_reruns_see_a_photo_changed_in_place(tmp_path):
    """The done-check, the sample cache and the record's content hash follow the photos."""
    from benchmarks.probe.api import RecordConflictError

    src = _coco_copy(tmp_path)
    split = import_dataset("coco", src / "test_coco.json", tmp_path / "split")
    cache = tmp_path / "samples"
    old = _probe(split, tmp_path / "out", cache)
    for name in PHOTOS:
        _invert(src / f"{name}.jpg")
    # the old record is not taken as this run's: the run stops, naming the data
    with pytest.raises(RecordConflictError, match="another dataset"):
        _probe(split, tmp_path / "out", cache)
    cached = _probe(split, tmp_path / "out2", cache)  # the sample cache holds the old photos' samples
    fresh = _probe(split, tmp_path / "out3")
    assert cached["dataset"]["content_hash"] == fresh["dataset"]["content_hash"] == split_identity(split)
    assert old["dataset"]["content_hash"] != fresh["dataset"]["content_hash"]
    assert cached["metrics"] == fresh["metrics"]
    assert cached["metrics"]["mIoU"] != old["metrics"]["mIoU"]


def test_a_task_identity_reads_only_that_task_manifest(tmp_path):
    """A run of seg does not open (or fail on) the pose manifest, whose bytes still count in the folder."""
    src = _coco_copy(tmp_path)
    split = import_dataset("coco", src / "test_coco.json", tmp_path / "split")
    seg_before = split_identity(split, tasks=["seg"])
    pose = json.loads((split / "pose.json").read_text())
    pose["keypoint_set"] = "no_such_set"
    (split / "pose.json").write_text(json.dumps(pose))
    with pytest.raises(ValueError, match="no_such_set"):
        split_identity(split)  # every task: the pose reader refuses its manifest
    seg_after = split_identity(split, tasks=["seg"])
    assert seg_after != seg_before  # the folder's bytes changed, and seg read no pose file to say so
