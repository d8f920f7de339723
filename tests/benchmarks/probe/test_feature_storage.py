"""Feature storage that cannot overflow silently: non-finite features are named errors before any fit,
and the on-disk cache detects, names and rebuilds a truncated entry."""

from __future__ import annotations

import re

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.backbones import build_probe_backbone  # noqa: E402
from benchmarks.probe.features.cache import NonFiniteFeatureError  # noqa: E402
from benchmarks.probe.features.store import FeatureStore  # noqa: E402
from benchmarks.probe.protocol import ProbeProtocol, quick_protocol  # noqa: E402


def _linear(p: ProbeProtocol, **changes) -> ProbeProtocol:
    tasks = {t: {"decoder": "linear"} for t in p.tasks}
    return p.replace(tasks=tasks, bootstrap_resamples=20, **changes)


def test_float16_overflow_is_an_error_naming_backbone_layer_and_image(tmp_path, monkeypatch):
    """A plug-in backbone emitting 8.5e4 values (float16 max: 65504) stops the run before any fit,
    with a message naming the backbone, the tapped layer and the image; float32 storage runs."""
    from benchmarks.probe.api import run_probe
    from benchmarks.probe.readout import stream

    fits = []
    real_solve = stream.solve_readout
    monkeypatch.setattr(  # the streamed read-out's solve: never reached before the error
        "benchmarks.probe.readout.stream.solve_readout", lambda *a, **k: fits.append(1) or real_solve(*a, **k)
    )
    data = make_toy_data(n_train=4, n_test=2, tasks=("seg",))
    p = _linear(quick_protocol()).replace(feature_dtype="float16")
    with pytest.raises(NonFiniteFeatureError) as err:
        run_probe("_probe_loud:LoudPixels", ["seg"], data, tmp_path / "f16", protocol=p)
    msg = str(err.value)
    assert "backbone LoudPixels" in msg and "layer 0" in msg and "image 'toy0'" in msg, msg
    assert re.search(r"exceed the float16 range \(max \|x\| = [0-9.]+e\+04 > 65504\)", msg), msg
    assert "feature_dtype to 'float32' or 'bfloat16'" in msg
    assert fits == [] and not list((tmp_path / "f16").rglob("*.json"))
    paths = run_probe(
        "_probe_loud:LoudPixels", ["seg"], data, tmp_path / "f32", protocol=p.replace(feature_dtype="float32")
    )
    assert fits == [1] and paths[0].is_file()


def test_nan_feature_names_its_layer_and_image_id():
    bb = build_probe_backbone("_probe_loud:NanPixels")
    p = quick_protocol()
    store = FeatureStore(bb, [0, 1], p, keep_in_memory=False)
    images = torch.rand(3, 3, *p.input_size)
    with pytest.raises(
        NonFiniteFeatureError, match=r"backbone NanPixels, layer 1, image 'b'.*1 non-finite.*NaN"
    ):
        store.features(images, ids=["a", "b", "c"])
    with pytest.raises(NonFiniteFeatureError, match=r"layer 1, image #1 of train features \(content hash"):
        FeatureStore(bb, [0, 1], p).compute(images, "train features")
    f, c = store.features(images[:1], ids=["a"])  # a batch without the NaN image is fine
    assert c is None and bool(torch.isfinite(f).all())


def test_truncated_cache_entry_is_named_and_rebuilt(tmp_path, capsys):
    p = quick_protocol()
    bb = build_probe_backbone("sapiens2_tiny", img_size=p.input_size)
    images = torch.rand(3, 3, *p.input_size)
    first = FeatureStore(bb, [1, 3], p, cache_dir=tmp_path)
    ref = first.compute(images)
    files = sorted(first.dir.glob("*.safetensors"))
    assert len(files) == 3 and not list(first.dir.glob("*.tmp"))
    victim = files[1]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # a crash mid-copy / full disk
    again = FeatureStore(bb, [1, 3], p, cache_dir=tmp_path)
    got = again.compute(images)
    err = capsys.readouterr().err
    assert str(victim) in err and "unreadable" in err and "computing it again" in err
    assert again.backbone_images == 1 and again.disk.rebuilt == [victim]
    assert torch.equal(got.feats, ref.feats) and torch.equal(got.cls, ref.cls)
    third = FeatureStore(bb, [1, 3], p, cache_dir=tmp_path, keep_in_memory=False)  # all entries valid again
    f, c = third.features(images)
    assert third.backbone_images == 0 and torch.equal(f, ref.feats) and torch.equal(c, ref.cls)
    assert third.memory == {}


def test_cache_entry_of_another_dtype_is_rebuilt(tmp_path, capsys):
    from safetensors.torch import save_file

    p = quick_protocol().replace(feature_dtype="float16")
    bb = build_probe_backbone("pixels")
    images = torch.rand(2, 3, *p.input_size)
    store = FeatureStore(bb, [0], p, cache_dir=tmp_path, keep_in_memory=False)
    ref, _ = store.features(images)
    path = sorted(store.dir.glob("*.safetensors"))[0]
    save_file({"feats": torch.zeros(3, 2, 2)}, path)  # float32 where the protocol stores float16
    again = FeatureStore(bb, [0], p, cache_dir=tmp_path, keep_in_memory=False)
    f, _ = again.features(images)
    assert "expected torch.float16" in capsys.readouterr().err
    assert again.backbone_images == 1 and torch.equal(f, ref)
