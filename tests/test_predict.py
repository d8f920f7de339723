"""``sapiens2-bench predict`` on real photos shipped with packages (tiny archs, so seconds per run)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.cli.main import main

ARCH = {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}
BACKBONE = {"type": "Sapiens2", "arch": ARCH, "img_size": [64, 48]}
DENSE = {"in_channels": 32, "upsample_channels": [16, 8, 8, 8], "conv_out_channels": [8],
         "conv_kernel_sizes": [3]}
CONFIGS = {
    "pose": {"type": "PoseTopdownEstimator", "decode_head": {
        "type": "PoseHeatmapHead", "in_channels": 32, "out_channels": 308, "deconv_out_channels": [16, 16],
        "deconv_kernel_sizes": [4, 4], "conv_out_channels": [16], "conv_kernel_sizes": [1]}},
    "seg": {"type": "SegEstimator", "decode_head": {
        "type": "SegHead", "in_channels": 32, "deconv_out_channels": [16, 8, 8, 8],
        "deconv_kernel_sizes": [4] * 4, "conv_out_channels": [8], "conv_kernel_sizes": [1],
        "num_classes": 29}},
    "normal": {"type": "NormalEstimator", "decode_head": {"type": "NormalHead", **DENSE}},
    "albedo": {"type": "AlbedoEstimator", "decode_head": {"type": "AlbedoHead", **DENSE}},
    "pointmap": {"type": "PointmapEstimator", "canonical_focal_length": 768.0, "decode_head": {
        "type": "PointmapHead", **DENSE, "scale_conv_out_channels": [8], "scale_conv_kernel_sizes": [1],
        "scale_final_layer": [32, 8, 4, 1]}},  # 4 x 3 tokens -> 2 x 2 after one stride-2 conv
}


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Astronaut (scikit-image) and Grace Hopper (matplotlib): real photos with a free licence."""
    import cv2
    import matplotlib.cbook as cbook
    from skimage import data

    folder = tmp_path_factory.mktemp("photos")
    astronaut = folder / "astronaut.png"
    cv2.imwrite(str(astronaut), cv2.cvtColor(data.astronaut()[::2, ::2], cv2.COLOR_RGB2BGR))  # 256 x 256
    hopper = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    return {"astronaut": astronaut, "hopper": hopper}


def _config(tmp_path, task):
    path = tmp_path / f"{task}.json"
    path.write_text(json.dumps({**CONFIGS[task], "backbone": BACKBONE}))
    return path


def _run(*argv) -> int:
    return main(["predict", *map(str, argv)])


@pytest.mark.parametrize("task", list(CONFIGS))
def test_random_weights_outputs_are_labelled(photos, tmp_path, task):
    out = tmp_path / "out"
    assert _run(photos["astronaut"], "--task", task, "--config", _config(tmp_path, task), "--random-weights",
                "--out", out) == 0
    stem = out / f"astronaut_{task}_random-weights"
    meta = json.loads(stem.with_suffix(".json").read_text())
    assert meta["random_weights"] is True and meta["checkpoint"] is None
    array = np.load(stem.with_suffix(".npy"))
    assert stem.with_suffix(".png").stat().st_size > 0
    if task == "pose":
        assert array.shape == (308, 3)
        assert np.all(np.isfinite(array))
    elif task == "seg":
        assert array.shape == (256, 256) and array.max() < 29
    else:
        assert array.shape == (3, 256, 256)
    if task == "normal":
        np.testing.assert_allclose(np.linalg.norm(array, axis=0), 1.0, atol=1e-4)
    if task == "albedo":
        assert array.min() >= 0 and array.max() <= 1


def test_random_banner_on_picture(photos, tmp_path):
    import cv2

    out = tmp_path / "out"
    cfg = _config(tmp_path, "seg")
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--random-weights", "--out", out) == 0
    picture = cv2.imread(str(out / "astronaut_seg_random-weights.png"))
    assert picture.shape[0] > 256  # the banner adds rows on top of the 256-high picture
    assert picture[2, :, 2].mean() > 150 and picture[2, :, 0].mean() < 60  # a red bar (BGR)


def test_checkpoint_prediction_matches_direct_model_call(photos, tmp_path):
    """The written labels equal the model run by hand on the resized, normalised image."""
    import cv2
    from safetensors.torch import save_file

    from sapiens2.datasets.io import read_rgb as read_image
    from sapiens2.inference import to_tensor
    from sapiens2.models.builder import build_model

    torch.manual_seed(3)
    model = build_model({**CONFIGS["seg"], "backbone": BACKBONE}).eval()
    ckpt = tmp_path / "seg.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(ckpt))
    out = tmp_path / "out"
    # No --config: the model is read off the checkpoint's tensor shapes (input size from the flag).
    code = _run(photos["hopper"], "--task", "seg", "--checkpoint", ckpt, "--input-size", "64x48",
                "--out", out)
    assert code == 0
    labels = np.load(out / "grace_hopper_seg.npy")
    rgb = read_image(photos["hopper"])
    x = to_tensor(cv2.resize(rgb, (48, 64), interpolation=cv2.INTER_LINEAR))
    expected = model.predict(x, size=rgb.shape[:2])["labels"][0].numpy()
    assert labels.shape == rgb.shape[:2]
    assert np.array_equal(labels, expected)
    assert json.loads((out / "grace_hopper_seg.json").read_text())["random_weights"] is False


def test_pose_crop_maps_box_centre_to_input_centre():
    from sapiens2.inference import pose_crop

    image = np.zeros((200, 300, 3), np.uint8)
    image[100, 150] = 255
    crop, mat = pose_crop(image, (100, 50, 200, 150), 1.25, (64, 48))
    assert crop.shape == (64, 48, 3)
    # The pose reader's UDP crop: pixel centres at integers, so the centre is ((w - 1) / 2, (h - 1) / 2).
    np.testing.assert_allclose(mat @ np.array([150, 100, 1.0]), [23.5, 31.5])
    # Aspect ratio fixed to the input's: the box the crop covers (extent size - 1 in UDP) is 48:64.
    box_w, box_h = 47 / mat[0, 0], 63 / mat[1, 1]
    assert box_w / box_h == pytest.approx(48 / 64)
    assert box_w == pytest.approx(100 * 1.25)  # the wider side, padded


def test_pose_with_bbox(photos, tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, "pose")
    assert _run(photos["astronaut"], "--task", "pose", "--config", cfg, "--random-weights",
                "--bbox", "60,20,200,250", "--no-flip-test", "--out", out) == 0
    meta = json.loads((out / "astronaut_pose_random-weights.json").read_text())
    assert meta["bbox_xyxy"] == [60, 20, 200, 250] and len(meta["keypoints"]) == 308


def test_bad_inputs(photos, tmp_path, capsys):
    cfg = _config(tmp_path, "seg")
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg) == 1
    assert "--random-weights" in capsys.readouterr().err
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--random-weights",
                "--input-size", "70x48") == 1
    err = capsys.readouterr().err
    assert "70x48" in err and "64" in err and "80" in err
    assert _run(photos["astronaut"], "--task", "seg", "--arch", "sapiens2_2b", "--random-weights") == 1
    err = capsys.readouterr().err
    assert "sapiens2_2b" in err and "sapiens2_0.4b" in err
    bad = tmp_path / "corrupt.safetensors"
    bad.write_bytes(b"not a checkpoint")
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--checkpoint", bad) == 1
    assert "corrupt.safetensors" in capsys.readouterr().err
    assert _run(tmp_path / "missing.png", "--task", "seg", "--config", cfg, "--random-weights") == 1
    assert "missing.png" in capsys.readouterr().err
    assert _run(photos["astronaut"], "--task", "pose", "--config", cfg, "--random-weights") == 1
    assert "does not match --task pose" in capsys.readouterr().err
