"""The one reader layer (``sapiens2.datasets.io``): the same rules for the datasets and ``eval``."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from benchmarks.cli.main import main
from sapiens2.datasets import AlbedoDataset, NormalDataset
from sapiens2.datasets.io import DatasetError, read_map, read_mask, read_npy


def _folders(root, *names):
    for n in names:
        (root / n).mkdir(parents=True, exist_ok=True)


def _manifest(root, task, recs):
    path = root / f"{task}.json"
    path.write_text(json.dumps({"task": task, "format_version": 1, "records": recs}))
    return path


def _image(root, h=6, w=5):
    cv2.imwrite(str(root / "img.png"), np.zeros((h, w, 3), np.uint8))


def test_zero_byte_and_oversized_header_npy_are_clear_errors(tmp_path, capsys):
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    with pytest.raises(DatasetError, match=r"empty\.npy: unreadable \.npy \(empty file, 0 bytes\)"):
        read_npy(empty)
    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as f:  # a valid header asking for 50000 x 50000 x 3 float32 = 27.9 GiB
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f4", "fortran_order": False, "shape": (50000, 50000, 3)})
        f.write(b"\0" * 900)
    assert huge.stat().st_size < 1100
    with pytest.raises(DatasetError, match=r"huge\.npy: .*27\.9 GiB.*truncated or corrupt"):
        read_npy(huge)
    # Through the eval CLI: exit 1 and a message naming the file, no traceback.
    _folders(tmp_path, "pred", "gt")
    np.save(tmp_path / "gt" / "a.npy", np.zeros((4, 4, 3), np.float32))
    for bad in (empty, huge):
        (tmp_path / "pred" / "a.npy").write_bytes(bad.read_bytes())
        assert main(["eval", "pointmap", "--pred", str(tmp_path / "pred"), "--gt", str(tmp_path / "gt")]) == 1
        err = capsys.readouterr().err
        assert "pred/a.npy" in err and "Traceback" not in err


def test_integer_npy_maps_are_never_rescaled(tmp_path):
    np.save(tmp_path / "u8.npy", np.full((4, 5, 3), 200, np.uint8))
    for kind in ("normal", "unit", "float"):
        with pytest.raises(DatasetError, match=r"u8\.npy: .* must hold floats.*got uint8"):
            read_map(tmp_path / "u8.npy", kind)


def test_albedo_ranges_that_disagree_name_both_files(tmp_path, capsys):
    """A 0..255 float .npy GT next to an 8-bit PNG prediction: an error, not MAE 119."""
    _folders(tmp_path, "pred", "gt")
    rgb = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    np.save(tmp_path / "gt" / "a.npy", rgb.astype(np.float32))
    cv2.imwrite(str(tmp_path / "pred" / "a.png"), rgb[..., ::-1])
    assert main(["eval", "albedo", "--pred", str(tmp_path / "pred"), "--gt", str(tmp_path / "gt")]) == 1
    err = capsys.readouterr().err
    assert "pred/a.png" in err and "gt/a.npy" in err and "ranges disagree" in err
    np.save(tmp_path / "gt" / "a.npy", rgb.astype(np.float32) / 255)  # the same albedo in [0, 1]
    out = tmp_path / "res.json"
    assert main(["eval", "albedo", "--pred", str(tmp_path / "pred"), "--gt", str(tmp_path / "gt"),
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["mae"] == pytest.approx(0.0, abs=1e-7)


def test_mask_rules(tmp_path):
    m = np.zeros((4, 5), bool)
    m[1:3, 2:4] = True
    np.save(tmp_path / "b.npy", m)
    np.save(tmp_path / "i.npy", m.astype(np.uint8))
    np.save(tmp_path / "soft.npy", m * 0.7)
    cv2.imwrite(str(tmp_path / "grey_rgb.png"), np.repeat(m[..., None] * 255, 3, 2).astype(np.uint8))
    colour = np.zeros((4, 5, 3), np.uint8)
    colour[0, 0] = (0, 0, 255)
    cv2.imwrite(str(tmp_path / "colour.png"), colour)
    for name in ("b.npy", "i.npy", "grey_rgb.png"):
        np.testing.assert_array_equal(read_mask(tmp_path / name), m)
    with pytest.raises(DatasetError, match=r"soft\.npy: .*only 0 and 1, found \[0\.7"):
        read_mask(tmp_path / "soft.npy")
    with pytest.raises(DatasetError, match=r"colour\.png: mask must be single-channel"):
        read_mask(tmp_path / "colour.png")


def test_datasets_and_eval_read_an_8bit_normal_png_alike(tmp_path):
    """Both paths accept an 8-bit normal PNG (v / 255 * 2 - 1) and see the same values."""
    _image(tmp_path)
    n = np.zeros((6, 5, 3), np.float32)
    n[..., 2] = -1.0
    n[2, 3] = (0.6, 0.0, -0.8)
    enc = np.round((n + 1) / 2 * 255).astype(np.uint8)
    cv2.imwrite(str(tmp_path / "n8.png"), enc[..., ::-1])
    expected = enc.astype(np.float32) / 255 * 2 - 1
    np.testing.assert_allclose(read_map(tmp_path / "n8.png", "normal"), expected)
    ds = NormalDataset(_manifest(tmp_path, "normal", [{"id": "a", "image": "img.png", "normal": "n8.png"}]))
    got = ds[0]["normal"].permute(1, 2, 0).numpy()
    unit = expected / np.linalg.norm(expected, axis=2, keepdims=True)
    np.testing.assert_allclose(got, unit, atol=1e-6)
    _folders(tmp_path, "pred", "gt")
    cv2.imwrite(str(tmp_path / "pred" / "a.png"), enc[..., ::-1])
    np.save(tmp_path / "gt" / "a.npy", unit)
    from evaluators.folders import evaluate_folders

    assert evaluate_folders("normal", tmp_path / "pred", tmp_path / "gt")["metrics"]["normal_mae"] < 0.5


def test_albedo_dataset_applies_the_same_range_rule(tmp_path):
    _image(tmp_path)
    np.save(tmp_path / "alb.npy", np.full((6, 5, 3), 128.0, np.float32))
    ds = AlbedoDataset(_manifest(tmp_path, "albedo", [{"id": "a", "image": "img.png", "albedo": "alb.npy"}]))
    with pytest.raises(DatasetError, match=r"alb\.npy \(record 'a' .*albedo values span \[128, 128\]"):
        ds[0]


def test_pointmap_png_is_refused(tmp_path):
    cv2.imwrite(str(tmp_path / "p.png"), np.zeros((4, 4, 3), np.uint16))
    with pytest.raises(DatasetError, match=r"p\.png: a pointmap must be a float \.npy or \.exr"):
        read_map(tmp_path / "p.png", "float")


def test_seg_eval_checks_label_range(tmp_path, capsys):
    _folders(tmp_path, "pred", "gt")
    cv2.imwrite(str(tmp_path / "gt" / "a.png"), np.full((4, 4), 40, np.uint8))
    cv2.imwrite(str(tmp_path / "pred" / "a.png"), np.zeros((4, 4), np.uint8))
    assert main(["eval", "seg", "--pred", str(tmp_path / "pred"), "--gt", str(tmp_path / "gt")]) == 1
    assert "gt/a.png" in capsys.readouterr().err
