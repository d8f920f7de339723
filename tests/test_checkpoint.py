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
