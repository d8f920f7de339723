"""Readers and ``eval`` folders: EXIF orientation applied, no stretched predictions, no 16-bit file holding
8-bit values read 256 times too dark, and an empty mask named by its file with a CLI switch."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from evaluators.folders import evaluate_folders
from sapiens2.datasets.io import DatasetError, read_map, read_rgb


def _cli(*argv) -> int:
    from benchmarks.cli.main import main

    return main([str(a) for a in argv])


def _upright(h=40, w=60) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 255 // w, yy * 255 // h, np.full((h, w), 128)], -1).astype(np.uint8)
    img[: h // 4, : w // 4] = (255, 0, 0)  # a red top-left corner fixes the orientation
    return img


def test_a_jpeg_with_orientation_6_is_read_upright(tmp_path):
    up = _upright()
    stored = Image.fromarray(up).transpose(Image.Transpose.ROTATE_90)  # the sensor's sideways frame
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    path = tmp_path / "phone.jpg"
    stored.save(path, quality=95, exif=exif)
    arr = read_rgb(path)
    assert arr.shape == up.shape
    assert np.abs(arr.astype(int) - up.astype(int)).mean() < 4  # JPEG noise only
    assert arr[2, 2, 0] > 200 and arr[2, 2, 1] < 60  # the red corner is top-left


def test_a_png_label_with_an_orientation_tag_is_read_upright(tmp_path):
    from sapiens2.datasets.io import read_label

    lab = np.zeros((4, 6), np.uint8)
    lab[0, :2] = 3
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(lab).transpose(Image.Transpose.ROTATE_90).save(tmp_path / "l.png", exif=exif)
    np.testing.assert_array_equal(read_label(tmp_path / "l.png"), lab)


def _normals(h, w, seed=0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(h, w, 3)).astype(np.float32)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _folders(tmp_path, pred, gt, name="0001"):
    for d, arr in (("pred", pred), ("gt", gt)):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        np.save(tmp_path / d / f"{name}.npy", arr)
    return tmp_path / "pred", tmp_path / "gt"


def test_a_transposed_prediction_is_an_error_naming_both_files(tmp_path):
    gt = _normals(96, 128)
    pred_dir, gt_dir = _folders(tmp_path, gt.transpose(1, 0, 2).copy(), gt)
    with pytest.raises(DatasetError, match=r"pred/0001.npy: prediction 128x96 .*gt/0001.npy 96x128"):
        evaluate_folders("normal", pred_dir, gt_dir)


def test_another_aspect_is_an_error_and_the_same_aspect_is_resized(tmp_path):
    gt = np.full((128, 96, 3), 0.5, np.float32)
    pred_dir, gt_dir = _folders(tmp_path / "a", np.full((64, 96, 3), 0.5, np.float32), gt)
    with pytest.raises(DatasetError, match="another aspect ratio"):
        evaluate_folders("albedo", pred_dir, gt_dir)
    pred_dir, gt_dir = _folders(tmp_path / "b", np.full((64, 48, 3), 0.5, np.float32), gt)
    assert evaluate_folders("albedo", pred_dir, gt_dir)["metrics"]["mae"] == pytest.approx(0.0)


def _png16(path, arr):
    Image.fromarray(arr.astype(np.uint16)).save(path)
    assert Image.open(path).mode.startswith("I")


def test_a_16_bit_png_holding_8_bit_values_is_an_error_unless_the_scale_is_given(tmp_path):
    vals = np.arange(0, 240, 10, dtype=np.uint16).reshape(4, 6)
    _png16(tmp_path / "a.png", vals)
    with pytest.raises(DatasetError, match=r"a\.png: a 16-bit PNG whose values are all <= 255"):
        read_map(tmp_path / "a.png", "unit")
    got = read_map(tmp_path / "a.png", "unit", png_max=255)
    np.testing.assert_allclose(got[..., 0], vals / 255.0, atol=1e-6)
    _png16(tmp_path / "full.png", vals * 257)  # a true 16-bit file reads by its bit depth
    np.testing.assert_allclose(read_map(tmp_path / "full.png", "unit")[..., 0], vals / 255.0, atol=1e-6)


def test_eval_png_max_scores_8_bit_values_in_16_bit_albedo_pngs_exactly(tmp_path, capsys):
    vals = (np.arange(24, dtype=np.uint16).reshape(4, 6) * 10)
    for d in ("pred", "gt"):
        (tmp_path / d).mkdir()
    _png16(tmp_path / "pred" / "0001.png", vals)
    np.save(tmp_path / "gt" / "0001.npy", np.repeat((vals / 255.0)[..., None], 3, -1).astype(np.float32))
    args = ("eval", "albedo", "--pred", tmp_path / "pred", "--gt", tmp_path / "gt")
    assert _cli(*args) == 1
    assert "0001.png: a 16-bit PNG" in capsys.readouterr().err
    assert _cli(*args, "--png-max", 255, "--json", tmp_path / "m.json") == 0
    import json

    assert json.loads((tmp_path / "m.json").read_text())["metrics"]["mae"] == pytest.approx(0.0, abs=1e-6)


def test_an_empty_mask_names_its_file_and_the_cli_can_skip_it(tmp_path, capsys):
    gt = _normals(8, 8)
    for name in ("0001", "0002"):
        pred_dir, gt_dir = _folders(tmp_path, gt, gt, name)
    (tmp_path / "mask").mkdir()
    Image.fromarray(np.full((8, 8), 255, np.uint8)).save(tmp_path / "mask" / "0001.png")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "mask" / "0002.png")
    args = ("eval", "normal", "--pred", pred_dir, "--gt", gt_dir, "--mask", tmp_path / "mask")
    assert _cli(*args) == 1
    err = capsys.readouterr().err
    assert "mask/0002.png" in err and "--allow-empty-masks" in err
    assert _cli(*args, "--allow-empty-masks", "--json", tmp_path / "m.json") == 0
