"""Checkpoint conversion official <-> transformers: round trips, refusals, and output parity.

Parity: the golden tiny task models (random weights, LayerScale near 1) are loaded into our
implementation and, after conversion, into the ``transformers`` port; with our fp32-RoPE setting the
two agree to float32 rounding, with the official bf16 RoPE they differ by the RoPE-precision gap, which
is printed and must be clearly larger.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from sapiens2.models import convert_hf as C
from sapiens2.models import hf_config as H

pytestmark = pytest.mark.hf

HF_OUTPUT = {"pose": "heatmaps", "seg": "logits", "normal": "normals", "pointmap": "pointmaps"}
TASK_CASES = ["pose_tiny", "seg_tiny", "normal_tiny", "pointmap_tiny"]


def _case(golden_models, name):
    from safetensors.torch import load_file

    manifest = json.loads((golden_models / "manifest.json").read_text())
    case = next(c for c in manifest["cases"] if c["name"] == name)
    tensors = load_file(str(golden_models / case["file"]))
    state = {k[len("state_dict."):]: v for k, v in tensors.items() if k.startswith("state_dict.")}
    return manifest, case, state, tensors


def _hf_model(state, task, img_size):
    from transformers.models.sapiens2 import modeling_sapiens2

    hf_state, _ = C.official_to_hf(state, task)
    config = H.hf_config_from_official(H.infer_official_config(state, task, img_size), task)
    model = getattr(modeling_sapiens2, C.HF_CLASSES[task])(config).eval()
    result = model.load_state_dict(hf_state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    return model


def _ours(manifest, case, state, rope_dtype):
    from sapiens2.models.builder import build_model

    cfg = copy.deepcopy(case["official_config"])
    backbone = cfg.get("backbone", cfg)
    backbone["pos_embed_rope_dtype"] = rope_dtype
    model = build_model(cfg, arch_settings=manifest["arch_settings"]).eval()
    model.load_state_dict(state, strict=True)
    return model


@pytest.mark.parametrize("name", ["backbone_tiny", "backbone_tiny_rope_fp32"] + TASK_CASES)
def test_round_trip_is_identity(golden_models, name):
    _, _, state, _ = _case(golden_models, name)
    hf_state, meta = C.official_to_hf(state)
    assert C.detect_layout(hf_state) == "hf"
    assert not any(k.startswith(("blocks.", "backbone.")) for k in hf_state)
    back = C.hf_to_official(hf_state, rope_dtype=meta[C.ROPE_DTYPE_KEY])
    assert set(back) == set(state)
    for key, value in state.items():
        assert back[key].dtype == value.dtype, key
        assert torch.equal(back[key], value), key


def test_w12_split_order(golden_models):
    """The first half of the fused w12 is the SiLU gate, the second the up projection."""
    _, _, state, _ = _case(golden_models, "backbone_tiny")
    hf_state, _ = C.official_to_hf(state)
    w12 = state["blocks.3.ffn.w12.weight"]
    half = w12.shape[0] // 2
    assert torch.equal(hf_state["model.layer.3.mlp.gate_proj.weight"], w12[:half])
    assert torch.equal(hf_state["model.layer.3.mlp.up_proj.weight"], w12[half:])
    # GQA layers keep their reduced K/V rows.
    assert hf_state["model.layer.8.attention.k_proj.weight"].shape == state["blocks.8.attn.wk.weight"].shape


@pytest.mark.parametrize("name,pattern", [
    ("albedo_tiny", "no albedo model"),
    ("backbone_tiny_4k_tokenizer", "4K tokenizer"),
    ("backbone_v1_tiny", "Sapiens v1"),
])
def test_unsupported_models_are_refused(golden_models, name, pattern):
    _, _, state, _ = _case(golden_models, name)
    with pytest.raises(C.ConversionError, match=pattern):
        C.official_to_hf(state)


def test_backbone_parity_fp32_rope_and_bf16_gap(golden_models):
    manifest, case, state, tensors = _case(golden_models, "backbone_tiny")
    x = tensors["input"]
    hf = _hf_model(state, "backbone", case["official_config"]["img_size"])
    with torch.inference_mode():
        ref = hf(x).last_hidden_state
        errs = {}
        for rope in ("fp32", "bf16"):
            model = _ours(manifest, case, state, rope)
            model.out_type = "raw"
            errs[rope] = (model(x)[-1] - ref).abs().max().item()
    print(f"backbone ours-vs-transformers max abs: fp32 RoPE {errs['fp32']:.3g}, "
          f"bf16 RoPE {errs['bf16']:.3g}")
    assert errs["fp32"] < 2e-6 * max(1.0, ref.abs().max().item())
    assert errs["bf16"] > 10 * errs["fp32"]


@pytest.mark.parametrize("name", TASK_CASES)
def test_task_parity_fp32_rope_and_bf16_gap(golden_models, name):
    manifest, case, state, tensors = _case(golden_models, name)
    task = C.detect_task(state)
    x = tensors["input"]
    hf = _hf_model(state, task, case["official_config"]["backbone"]["img_size"])
    with torch.inference_mode():
        out = hf(x)
        ref = getattr(out, HF_OUTPUT[task])
        errs = {}
        for rope in ("fp32", "bf16"):
            ours = _ours(manifest, case, state, rope)(x)
            first = ours[0] if isinstance(ours, (tuple, list)) else ours
            err = (first - ref).abs().max().item()
            if task == "pointmap":
                err = max(err, (ours[1].reshape(-1) - out.scales.reshape(-1)).abs().max().item())
            errs[rope] = err
    scale = max(1.0, ref.abs().max().item())
    print(f"{name}: ours-vs-transformers max abs: fp32 RoPE {errs['fp32']:.3g}, "
          f"bf16 RoPE {errs['bf16']:.3g}, max|out| {scale:.3g}")
    assert errs["fp32"] < 2e-6 * scale
    assert errs["bf16"] > 10 * errs["fp32"]


@pytest.mark.parametrize("name", ["sapiens2_0.4b_keypoints308_shutterstock_goliath_3po-1024x768",
                                  "sapiens2_0.4b_seg_shutterstock_goliath-1024x768",
                                  "sapiens2_0.4b_normal_metasim_render_people-1024x768",
                                  "sapiens2_0.4b_pointmap_render_people-1024x768"])
def test_hf_config_from_official_config_matches_param_count(name):
    """The HF model built from an official config has the official parameter count (on meta)."""
    from transformers.models.sapiens2 import modeling_sapiens2

    from sapiens2.reference import official_task_configs

    entry = official_task_configs()[name]
    config = H.hf_config_from_official(entry["model"])
    with torch.device("meta"):
        model = getattr(modeling_sapiens2, config.architectures[0])(config)
    assert sum(p.numel() for p in model.parameters()) == entry["num_params"]


def test_cli_round_trip_and_from_pretrained(golden_models, tmp_path):
    from safetensors.torch import load_file, save_file
    from transformers.models.sapiens2 import Sapiens2ForPoseEstimation

    from benchmarks.cli.main import main

    _, case, state, tensors = _case(golden_models, "pose_tiny")
    src = tmp_path / "pose.safetensors"
    save_file(state, str(src))
    assert main(["convert", str(src), str(tmp_path / "hf"), "--to", "hf", "--img-size", "128x96"]) == 0
    model, info = Sapiens2ForPoseEstimation.from_pretrained(str(tmp_path / "hf"), output_loading_info=True)
    assert not any(info.values()), info
    _check_preprocessor_config(tmp_path / "hf", (128, 96))
    back_path = tmp_path / "back.safetensors"
    assert main(["convert", str(tmp_path / "hf"), str(back_path), "--to", "official"]) == 0
    back = load_file(str(back_path))
    assert set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)
    cfg = json.loads((tmp_path / "back.config.json").read_text())
    assert cfg["decode_head"]["out_channels"] == 308 and cfg["backbone"]["img_size"] == [128, 96]


def _check_preprocessor_config(folder, hw):
    """The folder's preprocessor_config.json: our input policy, read by transformers' own loader, and
    (where torchvision, which Sapiens2ImageProcessor needs, is installed) loaded by AutoImageProcessor."""
    import importlib.util

    import numpy as np
    from transformers import AutoModel
    from transformers.image_processing_base import ImageProcessingMixin

    from sapiens2.inference import MEAN, STD

    cfg, _ = ImageProcessingMixin.get_image_processor_dict(str(folder))
    assert cfg["image_processor_type"] == "Sapiens2ImageProcessor"
    assert cfg["size"] == {"height": hw[0], "width": hw[1]}
    np.testing.assert_allclose(np.array(cfg["image_mean"]) * 255, MEAN)
    np.testing.assert_allclose(np.array(cfg["image_std"]) * 255, STD)
    assert cfg["do_rescale"] and cfg["rescale_factor"] == 1 / 255
    assert type(AutoModel.from_pretrained(str(folder))).__name__ == "Sapiens2Model"
    if importlib.util.find_spec("torchvision") is None:
        print("torchvision not installed: AutoImageProcessor not loaded (Sapiens2ImageProcessor needs it)")
        return
    from transformers import AutoImageProcessor

    proc = AutoImageProcessor.from_pretrained(str(folder))
    x = proc(np.full((40, 30, 3), 255, np.uint8), return_tensors="pt")["pixel_values"]
    assert tuple(x.shape[-2:]) == tuple(hw)


def test_cli_errors(golden_models, tmp_path, capsys):
    from safetensors.torch import save_file

    from benchmarks.cli.main import main

    _, _, state, _ = _case(golden_models, "albedo_tiny")
    save_file(state, str(tmp_path / "albedo.safetensors"))
    assert main(["convert", str(tmp_path / "albedo.safetensors"), str(tmp_path / "o"), "--to", "hf"]) == 1
    assert "no albedo model" in capsys.readouterr().err
    (tmp_path / "bad.safetensors").write_bytes(b"\x00garbage")
    assert main(["convert", str(tmp_path / "bad.safetensors"), str(tmp_path / "o"), "--to", "hf"]) == 1
    assert "bad.safetensors" in capsys.readouterr().err
