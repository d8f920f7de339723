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


def test_pose_box_that_does_not_fit_the_image_names_the_image(photos, tmp_path, capsys):
    """A 1e300 box (finite, so it parses) or one off the image: an error naming the image and the box."""
    cfg = _config(tmp_path, "pose")
    for box in ("0,0,1e300,1e300", "5000,5000,5100,5100"):
        assert _run(photos["astronaut"], "--task", "pose", "--config", cfg, "--random-weights",
                    "--bbox", box, "--no-flip-test", "--out", tmp_path / "out") == 1
        err = capsys.readouterr().err
        assert photos["astronaut"].name in err and "person box" in err and "does not fit" in err
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


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


def _checkpoint(tmp_path, task, seed=0):
    """A tiny random task model saved as an official-layout .safetensors, and its config file."""
    from safetensors.torch import save_file

    from sapiens2.models.builder import build_model

    torch.manual_seed(seed)
    model = build_model({**CONFIGS[task], "backbone": BACKBONE}).eval()
    ckpt = tmp_path / f"{task}.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(ckpt))
    return ckpt, _config(tmp_path, task)


@pytest.mark.parametrize("task", list(CONFIGS))
def test_input_size_512x384_every_task(photos, tmp_path, task):
    """The models are built for 64x48; ``--input-size 512x384`` must work for all five tasks
    (pointmap failed: its scale MLP has a fixed input size)."""
    ckpt, cfg = _checkpoint(tmp_path, task)
    out = tmp_path / "out"
    assert _run(photos["astronaut"], "--task", task, "--config", cfg, "--checkpoint", ckpt,
                "--input-size", "512x384", "--no-flip-test", "--quiet", "--out", out) == 0
    meta = json.loads((out / f"astronaut_{task}.json").read_text())
    assert meta["input_size_hw"] == [512, 384]
    array = np.load(out / f"astronaut_{task}.npy")
    assert np.all(np.isfinite(array))
    assert array.shape == {"pose": (308, 3), "seg": (256, 256)}.get(task, (3, 256, 256))
    if task == "pointmap":
        assert "scale_branch" in meta and np.isfinite(meta["scale"])


def test_pointmap_scale_branch_at_other_sizes(tmp_path):
    """Native size: the official head (no resize). Other size: the scale MLP sees the features
    resized to the native grid, the pointmap path runs at the new size."""
    import torch.nn.functional as F

    from sapiens2.inference import load_model

    path = str(_config(tmp_path, "pointmap"))
    native, _ = load_model("pointmap", config=path, random_weights=True)
    big, _ = load_model("pointmap", config=path, input_size_hw=(128, 96), random_weights=True)
    assert native.decode_head.scale_feature_hw is None
    assert big.decode_head.scale_feature_hw == (4, 3)
    x = torch.randn(1, 3, 128, 96)
    with torch.inference_mode():
        pointmap, scale = big(x)
        feat = big.extract_feat(x)[-1]
        head = big.decode_head
        expected = head.scale_final_layer(head.scale_conv_layers(
            F.interpolate(feat, size=(4, 3), mode="bilinear", align_corners=False)))
    assert pointmap.shape[-2:] == (128, 96)
    torch.testing.assert_close(scale, expected)


def test_pointmap_scale_mlp_mismatch_fails_before_any_forward(photos, tmp_path, capsys):
    cfg = json.loads(_config(tmp_path, "pointmap").read_text())
    cfg["decode_head"]["scale_final_layer"] = [33, 8, 4, 1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cfg))
    assert _run(photos["astronaut"], "--task", "pointmap", "--config", bad, "--random-weights", "--quiet",
                "--out", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "scale_final_layer[0] is 33" in err and "32" in err
    assert not (tmp_path / "out").exists()


def test_device_dtype_and_progress_are_reported(photos, tmp_path, capsys):
    out = tmp_path / "out"
    cfg = _config(tmp_path, "pose")
    assert _run(photos["astronaut"], photos["hopper"], "--task", "pose", "--config", cfg, "--random-weights",
                "--device", "cpu", "--out", out) == 0
    captured = capsys.readouterr()
    assert "device cpu" in captured.out and "dtype fp32" in captured.out
    stages = ("build model", "image 1/2: read astronaut.png", "image 2/2: forward 2/2", "image 2/2: write")
    for stage in stages:
        assert stage in captured.err, stage
    meta = json.loads((out / "grace_hopper_pose_random-weights.json").read_text())
    assert meta["device"] == "cpu" and meta["dtype"] == "fp32" and len(meta["forward_s"]) == 2
    assert meta["bbox_source"] == "whole image"
    assert _run(photos["astronaut"], "--task", "pose", "--config", cfg, "--random-weights", "--quiet",
                "--out", out) == 0
    quiet = capsys.readouterr()
    assert "forward" not in quiet.err and "dtype fp32" not in quiet.out


def test_device_auto_and_unavailable(photos, tmp_path, capsys):
    out = tmp_path / "out"
    cfg = _config(tmp_path, "seg")
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--random-weights", "--quiet",
                "--out", out) == 0
    meta = json.loads((out / "astronaut_seg_random-weights.json").read_text())
    assert meta["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--random-weights",
                    "--device", "cuda", "--out", out) == 1
        assert "--device cuda" in capsys.readouterr().err


def test_bf16_close_to_fp32_on_a_tiny_model(photos):
    """bf16 autocast really changes the arithmetic, and stays within the documented tolerances."""
    from sapiens2.datasets.io import read_rgb
    from sapiens2.inference import predict_array
    from sapiens2.models.builder import build_model
    from sapiens2.runtime import with_precision

    rgb = read_rgb(photos["astronaut"])
    for task in CONFIGS:
        torch.manual_seed(0)
        model = build_model({**CONFIGS[task], "backbone": BACKBONE}).eval()
        a = predict_array(with_precision(model, "cpu", "fp32"), rgb, task, flip_test=False).array
        b = predict_array(with_precision(model, "cpu", "bf16"), rgb, task, flip_test=False).array
        assert b.dtype == a.dtype and b.shape == a.shape
        assert not np.array_equal(a, b), f"{task}: bf16 gave the fp32 result (autocast not active?)"
        if task == "seg":
            assert (a == b).mean() >= 0.97
        elif task == "normal":
            cos = np.clip((a * b).sum(0), -1, 1)
            angle = np.degrees(np.arccos(cos))
            assert np.median(angle) <= 1.0 and np.percentile(angle, 99) <= 5.0
        elif task == "albedo":
            assert np.abs(a - b).mean() <= 0.005 and np.abs(a - b).max() <= 0.1
        elif task == "pointmap":
            dist = np.linalg.norm(a - b, axis=0)
            assert dist.mean() <= 0.1 * np.abs(a[2]).mean()
        else:  # pose: random heatmaps are nearly flat, so compare the scores and most keypoints
            assert np.abs(a[:, 2] - b[:, 2]).max() <= 0.1
            assert np.median(np.linalg.norm(a[:, :2] - b[:, :2], axis=1)) <= 3.0


def test_dtype_bf16_from_the_command_line(photos, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(photos["astronaut"], "--task", "albedo", "--config", _config(tmp_path, "albedo"),
                "--random-weights", "--dtype", "bf16", "--out", out) == 0
    assert "dtype bf16" in capsys.readouterr().out
    meta = json.loads((out / "astronaut_albedo_random-weights.json").read_text())
    assert meta["dtype"] == "bf16"


def test_help_documents_the_default_pose_box(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.replace("`", "").split())
    assert "WITHOUT --bbox THE WHOLE IMAGE IS THE PERSON BOX" in text
    assert "--device" in text and "--dtype" in text


def test_bbox_only_for_pose_and_same_stems_refused(photos, tmp_path, capsys):
    cfg = _config(tmp_path, "seg")
    assert _run(photos["astronaut"], "--task", "seg", "--config", cfg, "--random-weights",
                "--bbox", "1,2,3,4", "--out", tmp_path / "o") == 1
    assert "--task pose only" in capsys.readouterr().err
    other = tmp_path / "x" / "astronaut.png"
    other.parent.mkdir()
    other.write_bytes(photos["astronaut"].read_bytes())
    assert _run(photos["astronaut"], other, "--task", "seg", "--config", cfg, "--random-weights",
                "--out", tmp_path / "o") == 1
    assert "same file name stem" in capsys.readouterr().err


@pytest.mark.mediapipe
def test_bbox_mediapipe(photos, tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, "pose")
    assert _run(photos["astronaut"], "--task", "pose", "--config", cfg, "--random-weights",
                "--bbox", "mediapipe", "--no-flip-test", "--quiet", "--out", out) == 0
    meta = json.loads((out / "astronaut_pose_random-weights.json").read_text())
    x1, y1, x2, y2 = meta["bbox_xyxy"]
    assert meta["bbox_source"] == "mediapipe"
    # The astronaut sits in the left two thirds of the 256 x 256 photo, head near the top.
    assert 0 <= x1 < x2 <= 256 and 0 <= y1 < y2 <= 256 and (x2 - x1) * (y2 - y1) < 0.95 * 256 * 256
