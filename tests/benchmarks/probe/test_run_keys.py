"""Done markers, resume and the feature cache are keyed on everything that changes a probe's result
(protocol, data content, backbone config and weights, task, seed), and no run overwrites another's record."""

from __future__ import annotations

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.api import RecordConflictError, run_probe  # noqa: E402
from benchmarks.probe.protocol import quick_protocol  # noqa: E402
from sapiens2.records.results import read_record  # noqa: E402

SEG = ("seg",)


def _data(seed: int):
    return make_toy_data(tasks=SEG, seed=seed)


@pytest.mark.slow
def test_another_dataset_never_returns_the_old_record(tmp_path):
    (first,) = run_probe("pixels", SEG, _data(0), tmp_path, protocol="quick")
    before = first.read_bytes()
    with pytest.raises(RecordConflictError, match="another dataset"):
        run_probe("pixels", SEG, _data(1), tmp_path, protocol="quick")
    assert first.read_bytes() == before  # and the first run's record is kept as it was
    (again,) = run_probe("pixels", SEG, _data(0), tmp_path, protocol="quick")  # the same run: done marker
    assert again == first and first.read_bytes() == before


@pytest.mark.slow
def test_other_weights_never_return_the_random_init_record(tmp_path):
    from safetensors.torch import save_file

    from benchmarks.probe.backbones import build_probe_backbone

    other = build_probe_backbone("sapiens2_tiny", init_seed=5)
    ckpt = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in other.model.state_dict().items()}, str(ckpt))
    run_probe("sapiens2_tiny", SEG, _data(0), tmp_path / "out", protocol="quick")
    with pytest.raises(RecordConflictError, match="other weights"):
        run_probe("sapiens2_tiny", SEG, _data(0), tmp_path / "out", protocol="quick", checkpoint=ckpt)


@pytest.mark.slow
def test_a_checkpoint_of_another_run_is_ignored_with_a_message(tmp_path, capsys):
    """A run killed on dataset A and restarted on B does not continue A's decoder."""
    (a,) = run_probe("pixels", SEG, _data(0), tmp_path / "out", protocol="quick")
    assert a.with_suffix(".ckpt.pt").is_file()
    a.unlink()  # as if killed after the last checkpoint, before the record
    capsys.readouterr()
    (b,) = run_probe("pixels", SEG, _data(1), tmp_path / "out", protocol="quick")
    assert "ignoring the decoder checkpoint" in capsys.readouterr().err
    (clean,) = run_probe("pixels", SEG, _data(1), tmp_path / "clean", protocol="quick")
    rec, ref = read_record(b), read_record(clean)
    assert rec["notes"].startswith("decoder trained from iteration 0")
    assert rec["metrics"] == ref["metrics"]
    assert rec["config"]["run"] == ref["config"]["run"]


@pytest.mark.slow
def test_a_second_protocol_keeps_the_first_protocols_record(tmp_path):
    (first,) = run_probe("pixels", SEG, _data(0), tmp_path, protocol="quick")
    before = first.read_bytes()
    other = quick_protocol().replace(iterations=31)
    (second,) = run_probe("pixels", SEG, _data(0), tmp_path, protocol=other)
    assert second != first and first.read_bytes() == before
    ids = {read_record(p)["protocol"]["protocol_id"] for p in (first, second)}
    assert ids == {quick_protocol().protocol_id(SEG[0]), other.protocol_id(SEG[0])}


def test_feature_key_hashes_every_weight(tmp_path):
    """A weight changed past the first 4096 bytes of its tensor gives another key, so a replaced
    checkpoint never reuses the old features."""
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.features.store import FeatureStore, feature_key

    protocol = quick_protocol()
    bb = build_probe_backbone("sapiens2_tiny", img_size=protocol.input_size)
    name, big = max(bb.state_dict().items(), key=lambda kv: kv[1].numel())
    assert big.numel() * big.element_size() > 4096
    key = feature_key(bb, [1, 3], protocol)
    images = torch.rand(2, 3, *protocol.input_size)
    FeatureStore(bb, [1, 3], protocol, cache_dir=tmp_path).compute(images)
    with torch.no_grad():
        bb.state_dict()[name].view(-1)[-1] += 1.0
    assert feature_key(bb, [1, 3], protocol) != key
    store = FeatureStore(bb, [1, 3], protocol, cache_dir=tmp_path)
    store.compute(images)
    assert store.backbone_images == 2
