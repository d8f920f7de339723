"""Checkpoint files and strict loading: formats, corrupt files, mismatch reports, prefixes."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from sapiens2.models.builder import build_model
from sapiens2.models.checkpoint import CheckpointMismatchError, load_checkpoint, load_state_dict_file

TINY_ARCH = {"embed_dims": 32, "num_layers": 2, "num_heads": 4, "feedforward_channels": 64}


SEG_CFG = {
    "type": "SegEstimator",
    "backbone": {"type": "Sapiens2", "arch": dict(TINY_ARCH), "img_size": [64, 48], "out_type": "featmap"},
    "decode_head": {"type": "SegHead", "in_channels": 32, "num_classes": 5, "deconv_out_channels": [8],
                    "deconv_kernel_sizes": [4], "conv_out_channels": [8], "conv_kernel_sizes": [1]},
}


def _tiny_seg(seed=0):
    torch.manual_seed(seed)
    return build_model(SEG_CFG).eval()


def _same_params(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_safetensors_round_trip_gives_identical_outputs(tmp_path):
    src, dst = _tiny_seg(0), _tiny_seg(1)
    assert not _same_params(src, dst)
    path = tmp_path / "seg.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(path))
    report = load_checkpoint(dst, path)
    assert report.target == "model" and report.loaded == len(src.state_dict())
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        torch.testing.assert_close(dst(x), src(x), rtol=0, atol=0)


def test_pth_weights_only_round_trip_and_state_dict_unwrap(tmp_path):
    src, dst = _tiny_seg(0), _tiny_seg(1)
    path = tmp_path / "seg.pth"
    torch.save({"state_dict": src.state_dict(), "meta": {"epoch": 3, "note": "x"}}, path)
    assert set(load_state_dict_file(path)) == set(src.state_dict())
    load_checkpoint(dst, path)
    assert _same_params(src, dst)


class _Payload:
    pass


def test_pth_with_arbitrary_objects_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(1), "obj": _Payload()}, path)
    with pytest.raises(ValueError, match="weights_only=True") as err:
        load_state_dict_file(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_corrupt_and_truncated_files_name_the_file(tmp_path, suffix):
    good = tmp_path / ("good" + suffix)
    sd = {"a": torch.arange(1000, dtype=torch.float32), "b": torch.ones(3, 3)}
    if suffix == ".safetensors":
        save_file(sd, str(good))
    else:
        torch.save(sd, good)
    data = good.read_bytes()
    for name, payload in [("truncated", data[: len(data) // 2]), ("garbage", b"\x00not a checkpoint" * 7)]:
        bad = tmp_path / (name + suffix)
        bad.write_bytes(payload)
        with pytest.raises(ValueError) as err:
            load_state_dict_file(bad)
        assert str(bad) in str(err.value)


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        load_state_dict_file(tmp_path / "nope.safetensors")
    odd = tmp_path / "weights.npz"
    odd.write_bytes(b"x")
    with pytest.raises(ValueError, match="unknown checkpoint suffix"):
        load_state_dict_file(odd)


def test_mismatch_error_lists_missing_unexpected_and_wrong_shaped_keys():
    model = _tiny_seg()
    sd = dict(model.state_dict())
    del sd["decode_head.conv_seg.bias"]
    sd["decode_head.extra.weight"] = torch.zeros(2)
    sd["decode_head.conv_seg.weight"] = torch.zeros(7, 8, 1, 1)
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(model, sd)
    msg = str(err.value)
    assert isinstance(err.value, RuntimeError)
    assert "1 missing key(s): decode_head.conv_seg.bias" in msg
    assert "1 unexpected key(s): decode_head.extra.weight" in msg
    assert "decode_head.conv_seg.weight (checkpoint [7, 8, 1, 1] vs model [5, 8, 1, 1])" in msg
    assert err.value.missing == ["decode_head.conv_seg.bias"]


def test_long_key_lists_are_truncated_with_counts():
    model = _tiny_seg()
    sd = {f"junk.{i}": torch.zeros(1) for i in range(25)}
    sd.update({k: v for k, v in model.state_dict().items() if not k.startswith("backbone.blocks.")})
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint(model, sd)
    n_missing = sum(k.startswith("backbone.blocks.") for k in model.state_dict())
    assert f"{n_missing} missing key(s)" in str(err.value) and f"and {n_missing - 10} more" in str(err.value)
    assert "25 unexpected key(s)" in str(err.value) and "and 15 more" in str(err.value)


def test_non_strict_loads_what_fits_and_reports_the_rest():
    src, dst = _tiny_seg(0), _tiny_seg(1)
    sd = dict(src.state_dict())
    sd["decode_head.conv_seg.weight"] = torch.zeros(7, 8, 1, 1)
    report = load_checkpoint(dst, sd, strict=False)
    assert [m[0] for m in report.mismatched] == ["decode_head.conv_seg.weight"]
    got, ref = dst.state_dict(), src.state_dict()
    assert torch.equal(got["decode_head.conv_seg.bias"], ref["decode_head.conv_seg.bias"])
    assert not torch.equal(got["decode_head.conv_seg.weight"], ref["decode_head.conv_seg.weight"])


def test_backbone_only_checkpoint_loads_into_the_estimator_backbone(tmp_path):
    src, dst = _tiny_seg(0), _tiny_seg(1)
    head_before = {k: v.clone() for k, v in dst.decode_head.state_dict().items()}
    path = tmp_path / "pretrain.safetensors"
    save_file({k: v.contiguous() for k, v in src.backbone.state_dict().items()}, str(path))
    report = load_checkpoint(dst, path)
    assert report.target == "backbone"
    assert _same_params(src.backbone, dst.backbone)
    assert all(torch.equal(v, head_before[k]) for k, v in dst.decode_head.state_dict().items())
    sd = dict(src.backbone.state_dict())
    sd.pop("cls_token")
    with pytest.raises(CheckpointMismatchError, match="backbone.*cls_token"):
        load_checkpoint(dst, sd)


def test_task_checkpoint_loads_into_a_bare_backbone():
    src = _tiny_seg(0)
    torch.manual_seed(5)
    backbone = build_model({"type": "Sapiens2", "arch": dict(TINY_ARCH), "img_size": [64, 48]})
    report = load_checkpoint(backbone, src.state_dict())
    assert _same_params(src.backbone, backbone)
    assert report.ignored and all(k.startswith("decode_head.") for k in report.ignored)


def test_meta_model_loads_with_assign():
    src = _tiny_seg(0)
    meta = build_model(SEG_CFG, device="meta")
    load_checkpoint(meta, src.state_dict(), assign=True)
    assert not any(t.is_meta for t in meta.state_dict().values())
    assert _same_params(src, meta)


# --------------------------------------------------------------- non-finite weights (issue 13.6)
def _poisoned_state(value: float) -> tuple[dict, list[str]]:
    """A tiny seg model's state dict with ``value`` written into three tensors (one wholly)."""
    state = {k: v.clone().contiguous() for k, v in _tiny_seg(0).state_dict().items()}
    floats = [k for k, v in state.items() if v.is_floating_point() and v.numel() > 1]
    bad = [floats[1], floats[len(floats) // 2], floats[-1]]
    state[bad[0]].fill_(value)  # an all-NaN tensor, as in a diverged run
    state[bad[1]].view(-1)[0] = value
    state[bad[2]].view(-1)[-1] = value
    return state, bad


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_nonfinite_weights_are_refused_at_load_naming_file_and_keys(tmp_path, suffix, value):
    from sapiens2.errors import BenchError
    from sapiens2.models.checkpoint import NonFiniteWeightsError

    state, bad = _poisoned_state(value)
    path = tmp_path / f"poisoned{suffix}"
    save_file(state, str(path)) if suffix == ".safetensors" else torch.save(state, path)
    with pytest.raises(NonFiniteWeightsError) as err:
        load_state_dict_file(path)
    msg = str(err.value)
    assert str(path) in msg and "NaN or Inf" in msg and "3 weight tensor(s)" in msg
    assert all(k in msg for k in bad), msg
    assert sorted(err.value.keys) == sorted(bad)  # every bad key
    n_all = state[bad[0]].numel()
    assert f"{bad[0]} ({n_all} of {n_all} values)" in msg and f"{bad[1]} (1 of " in msg
    assert isinstance(err.value, BenchError) and isinstance(err.value, ValueError)
    # loading into a model: refused before any tensor is copied
    dst = _tiny_seg(1)
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    with pytest.raises(NonFiniteWeightsError, match="poisoned"):
        load_checkpoint(dst, path)
    with pytest.raises(NonFiniteWeightsError, match="state dict"):
        load_checkpoint(dst, state)
    assert all(torch.equal(before[k], v) for k, v in dst.state_dict().items())
    # still readable on purpose, for inspecting the broken file
    assert set(load_state_dict_file(path, allow_nonfinite=True)) == set(state)


def test_finite_checks_skip_integer_buffers_and_bfloat16_is_checked():
    from sapiens2.models.checkpoint import check_finite, nonfinite_tensors

    check_finite({"idx": torch.arange(4), "mask": torch.ones(3, dtype=torch.bool), "w": torch.ones(2)})
    assert nonfinite_tensors({"w": torch.tensor([1.0, float("nan")], dtype=torch.bfloat16)}) == [("w", 1, 2)]
    assert nonfinite_tensors({"w": torch.empty(3, device="meta")}) == []
    # finite values whose sum overflows (the fast path) are not reported; an Inf among them is
    big = torch.full((8,), 60000.0, dtype=torch.float16)
    assert not torch.isfinite(big.sum()) and nonfinite_tensors({"w": big}) == []
    big[3] = float("inf")
    assert nonfinite_tensors({"w": big}) == [("w", 1, 8)]
    assert nonfinite_tensors({"z": torch.tensor([1 + 1j, complex("nan")])}) == [("z", 1, 2)]


def test_nonfinite_checkpoint_fails_predict_with_one_message(tmp_path, capsys):
    """Old behaviour: an all-NaN checkpoint predicted all-background labels with exit code 0."""
    import cv2
    import numpy as np

    from benchmarks.cli.main import main

    image = tmp_path / "img.png"
    cv2.imwrite(str(image), np.random.default_rng(0).integers(0, 255, (64, 48, 3), dtype=np.uint8))
    state = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
             for k, v in _tiny_seg(0).state_dict().items()}
    ckpt = tmp_path / "all_nan.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(ckpt))
    out = tmp_path / "out"
    code = main(["predict", str(image), "--task", "seg", "--checkpoint", str(ckpt), "--input-size", "64x48",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "all_nan.safetensors" in err and "NaN or Inf" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("backbone",
                         ["sapiens2_tiny", pytest.param("dinov2_small_tiny", marks=pytest.mark.hf)])
def test_probe_backbones_refuse_nonfinite_weights(tmp_path, backbone):
    """Both probe loading paths (Sapiens2 via load_checkpoint, transformers via its own loader)."""
    from benchmarks.probe.backbones import build_probe_backbone
    from sapiens2.models.checkpoint import NonFiniteWeightsError

    model = build_probe_backbone(backbone, img_size=(64, 64)).model
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    key = next(k for k, v in state.items() if v.is_floating_point() and v.numel() > 1)
    state[key].view(-1)[0] = float("nan")
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    with pytest.raises(NonFiniteWeightsError) as err:
        build_probe_backbone(backbone, checkpoint=path, img_size=(64, 64))
    assert str(path) in str(err.value) and key in str(err.value)
    if backbone.startswith("dinov2"):  # a save_pretrained folder goes through from_pretrained
        with torch.no_grad():
            model.get_parameter(key).view(-1)[0] = float("inf")
        model.save_pretrained(tmp_path / "folder")
        with pytest.raises(NonFiniteWeightsError) as err:
            build_probe_backbone(backbone, checkpoint=tmp_path / "folder", img_size=(64, 64))
        assert str(tmp_path / "folder") in str(err.value) and key in str(err.value)


@pytest.mark.hf
@pytest.mark.parametrize("suffix", [".bin", ".pt", ".pth"])
def test_hf_backbone_pickle_checkpoints(tmp_path, suffix):
    """A tensors-only pickle loads (weights_only=True); one with other objects is a clear ValueError."""
    from benchmarks.probe.backbones import build_probe_backbone

    src = build_probe_backbone("dinov2_small_tiny", img_size=(64, 64))
    good = tmp_path / f"good{suffix}"
    torch.save(src.model.state_dict(), good)
    torch.manual_seed(123)
    dst = build_probe_backbone("dinov2_small_tiny", checkpoint=good, img_size=(64, 64))
    assert dst.weights == str(good) and _same_params(src.model, dst.model)
    evil = tmp_path / f"evil{suffix}"
    torch.save({**src.model.state_dict(), "obj": _Payload()}, evil)
    with pytest.raises(ValueError, match="weights_only=True") as err:
        build_probe_backbone("dinov2_small_tiny", checkpoint=evil, img_size=(64, 64))
    assert str(evil) in str(err.value) and "_Payload" in str(err.value)
    folder = tmp_path / "folder"
    src.model.save_pretrained(folder)
    (folder / "model.safetensors").unlink()
    torch.save({**src.model.state_dict(), "obj": _Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match="weights_only=True") as err:
        build_probe_backbone("dinov2_small_tiny", checkpoint=folder, img_size=(64, 64))
    assert str(folder) in str(err.value)
