"""Probe unit tests: protocol id, backbone plug-ins, decoders, bad input, resume."""

from __future__ import annotations

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.protocol import ProbeProtocol, body_protocol, default_protocol, quick_protocol  # noqa: E402
from sapiens2.errors import UnknownNameError  # noqa: E402

HF_TINY = [
    "dinov2_small_tiny",
    "dinov2_small_reg_tiny",
    "dinov3_vits16_tiny",
    "mae_base_tiny",
    "clip_b16_tiny",
    "siglip_b16_tiny",
]


def test_protocol_id_hashes_every_knob_of_its_task():
    p = ProbeProtocol()
    assert p.protocol_ids() == ProbeProtocol().protocol_ids()
    assert ProbeProtocol.from_dict(p.to_dict()).protocol_ids() == p.protocol_ids()
    assert len(set(p.protocol_ids().values())) == len(p.tasks)
    # (change, tasks whose id it changes); the linear read-out trains nothing
    every = set(p.tasks)
    changed = [
        (p.replace(cls_concat=False), every),
        (p.replace(input_size=(128, 96)), every),
        (p.replace(tasks={"seg": {"decoder": "pixelshuffle"}}), {"seg"}),
        (p.replace(padding="resize"), every),
        (p.replace(shortcut="none", tasks={t: {"decoder": "pixelshuffle"} for t in p.tasks}), every),
        (p.replace(ridge_alphas=(1e-3, 1.0)), every),
        (p.replace(tasks={"seg": {"logit_margin": 5.0}}), {"seg"}),
        (p.replace(tasks={"pose": {"sigma": 3.0}}), {"pose"}),
        (p.replace(backbone_dtype="float32"), every),
        (p.replace(ridge_product_dtype="float32"), every),
        (p.replace(bootstrap_resamples=100), every),
        (p.replace(max_test_samples=10), every),
    ]
    for c, expected in changed:
        assert {t for t in p.tasks if c.protocol_id(t) != p.protocol_id(t)} == expected
    # knobs only a trained body reads change no linear probe's id
    albedo_weights = {"albedo": {"loss_weights": {"l1": 1.0, "grad": 0.5}}}
    for c in (p.replace(lr=2e-2), p.replace(iterations=201), p.replace(optimizer="adam"),
              p.replace(schedule="warmup_constant"), p.replace(batch_size=4), p.replace(decoder_channels=8),
              p.replace(loss_stride=1), p.replace(tasks=albedo_weights)):
        assert c.protocol_ids() == p.protocol_ids()


def test_knobs_left_out_of_a_linear_probes_id_change_none_of_its_numbers(tmp_path):
    """The linear read-out's id leaves out the body's knobs: they change nothing it computes."""
    from benchmarks.probe.api import run_probe
    from sapiens2.records.results import read_record

    data = make_toy_data(tasks=("seg", "pointmap"))
    q = quick_protocol()
    linear = q.replace(tasks={t: {"decoder": "linear"} for t in q.tasks})
    other = linear.replace(lr=0.5, iterations=3, batch_size=2, optimizer="adam", schedule="warmup_constant",
                           decoder_channels=8, decoder_min_channels=8, loss_stride=1, grad_clip=0.5,
                           tasks={"seg": {"loss_weights": {"ce": 2.0, "dice": 0.0}}})
    assert other.protocol_ids() == linear.protocol_ids()
    runs = [run_probe("pixels", ["seg", "pointmap"], data, tmp_path / str(i), protocol=p)
            for i, p in enumerate((linear, other))]
    for a, b in zip(*runs):
        ra, rb = read_record(a), read_record(b)
        assert ra["metrics"] == rb["metrics"] and ra["intervals"] == rb["intervals"]
        assert ra["config"]["protocol"] == rb["config"]["protocol"]


def test_changing_one_tasks_knob_changes_only_that_tasks_id():
    p = default_protocol()
    q = p.replace(tasks={"pose": {"sigma": p.task("pose").sigma + 1}})
    assert q.protocol_id("pose") != p.protocol_id("pose")
    assert {t: q.protocol_id(t) for t in p.tasks if t != "pose"} == {
        t: p.protocol_id(t) for t in p.tasks if t != "pose"}


def test_removing_a_task_changes_no_other_tasks_id():
    for p in (default_protocol(), quick_protocol(), body_protocol()):
        tasks = {t: s for t, s in p.tasks.items() if t != "albedo"}
        without = ProbeProtocol(**{**p.__dict__, "tasks": tasks})
        assert without.protocol_ids() == {t: i for t, i in p.protocol_ids().items() if t != "albedo"}


def test_a_task_protocol_is_a_protocol_of_that_task_alone():
    for p in (default_protocol(), body_protocol()):
        for t in p.tasks:
            view = p.task_protocol(t)
            assert list(view["tasks"]) == [t]
            assert ProbeProtocol.from_dict(view).task_protocol(t) == view
    linear = default_protocol().task_protocol("seg")
    body_only = {"lr", "iterations", "batch_size", "optimizer", "decoder_channels", "loss_stride"}
    assert not body_only & set(linear)
    assert not {"loss", "loss_weights"} & set(linear["tasks"]["seg"])
    body = body_protocol().task_protocol("seg")
    assert body_only <= set(body)
    assert body["tasks"]["seg"]["loss_weights"] == {"ce": 1.0, "dice": 0.5}


def test_tapped_layers_evenly_spaced_last_included():
    p = ProbeProtocol()
    assert p.tapped_layers(12) == [2, 5, 8, 11]
    assert p.tapped_layers(24) == [5, 11, 17, 23]
    assert p.tapped_layers(3) == [0, 1, 2]
    assert p.tapped_layers(1) == [0]


def test_protocol_rejects_bad_values():
    with pytest.raises(ValueError, match="padding"):
        ProbeProtocol(padding="mirror")
    with pytest.raises(ValueError, match="decoder"):
        ProbeProtocol().replace(tasks={"seg": {"decoder": "mlp"}})
    with pytest.raises(UnknownNameError, match="unknown probe protocol key 'learning_rate'; known: .*lr"):
        ProbeProtocol.from_dict({"learning_rate": 1.0})
    with pytest.raises(ValueError, match="shortcut"):
        ProbeProtocol(shortcut="lstsq")
    with pytest.raises(ValueError, match="needs shortcut='ridge'"):
        ProbeProtocol(shortcut="none").replace(tasks={"seg": {"decoder": "linear"}})
    with pytest.raises(ValueError, match="ridge_alphas"):
        ProbeProtocol(ridge_alphas=(0.0, 1.0))


@pytest.mark.parametrize("name", ["sapiens2_tiny", "sapiens_tiny", "pixels",
                                  *(pytest.param(n, marks=pytest.mark.hf) for n in HF_TINY)])
def test_backbones_return_declared_features(name):
    from benchmarks.probe.backbones import build_probe_backbone

    bb = build_probe_backbone(name, img_size=(50, 40))
    assert not any(p.requires_grad for p in bb.parameters()) and not bb.training
    layers = ProbeProtocol().tapped_layers(bb.num_layers)
    feats, cls = bb.extract(torch.rand(2, 3, 50, 40), layers, "pad")  # 50x40 is padded to the patch grid
    gh, gw = -(-50 // bb.patch_size), -(-40 // bb.patch_size)
    assert [tuple(f.shape) for f in feats] == [(2, bb.embed_dims, gh, gw)] * len(layers)
    assert (cls is not None) == bb.has_cls
    if cls is not None:
        assert [tuple(c.shape) for c in cls] == [(2, bb.embed_dims)] * len(layers)


@pytest.mark.hf
def test_random_init_is_seeded():
    from benchmarks.probe.backbones import build_probe_backbone

    a = build_probe_backbone("dinov2_small_tiny")
    b = build_probe_backbone("dinov2_small_tiny")
    c = build_probe_backbone("dinov2_small_tiny", init_seed=1)
    x = torch.rand(1, 3, 32, 32)
    fa, fb, fc = (m.extract(x, [2])[0][0] for m in (a, b, c))
    assert torch.equal(fa, fb) and not torch.allclose(fa, fc)


@pytest.mark.hf
def test_hf_backbone_from_local_folder(tmp_path):
    import transformers

    from benchmarks.probe.backbones import build_probe_backbone

    cfg = transformers.Dinov2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        patch_size=16,
        image_size=64,
    )
    torch.manual_seed(3)
    transformers.Dinov2Model(cfg).save_pretrained(tmp_path / "dino")
    bb = build_probe_backbone({"type": "HFViTProbe", "family": "dinov2"}, checkpoint=tmp_path / "dino")
    ref = transformers.Dinov2Model.from_pretrained(tmp_path / "dino").eval()
    x = torch.rand(1, 3, 64, 48)
    feats, cls = bb.extract(x, [1])
    with torch.no_grad():
        want = ref(pixel_values=bb.prepare(x)).last_hidden_state
    torch.testing.assert_close(cls[0], want[:, 0])
    torch.testing.assert_close(feats[0].flatten(2).transpose(1, 2), want[:, 1:])
    assert bb.describe()["weights"] == str(tmp_path / "dino")


@pytest.mark.slow
def test_user_backbone_plugin_worked_example(tmp_path):
    """The docs/probing.md example: register one small class, probe it by name."""
    import torch.nn.functional as F

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import ProbeBackbone
    from benchmarks.probe.registry import PROBE_BACKBONES

    @PROBE_BACKBONES.register_module(force=True)
    class MeanColourPatches(ProbeBackbone):
        def __init__(self, img_size=None):
            super().__init__()
            self.patch_size, self.embed_dims, self.num_layers, self.has_cls = 8, 3, 1, False

        def forward_layers(self, x, layers):
            return [F.avg_pool2d(x, self.patch_size) for _ in layers], None

    paths = run_probe("MeanColourPatches", ["albedo"], make_toy_data(), tmp_path, protocol="quick")
    from sapiens2.records.results import read_record

    rec = read_record(paths[0])
    assert rec["model"]["backbone"] == "MeanColourPatches" and rec["protocol"]["kind"] == "probe"


def test_feature_shape_mismatch_fails_before_training(tmp_path):
    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import FeatureShapeError, ProbeBackbone
    from benchmarks.probe.registry import PROBE_BACKBONES

    @PROBE_BACKBONES.register_module(force=True)
    class LiesAboutChannels(ProbeBackbone):
        def __init__(self, img_size=None):
            super().__init__()
            self.patch_size, self.embed_dims, self.num_layers, self.has_cls = 16, 10, 1, False

        def forward_layers(self, x, layers):
            return [torch.zeros(x.shape[0], 7, x.shape[2] // 16, x.shape[3] // 16) for _ in layers], None

    with pytest.raises(FeatureShapeError, match=r"LiesAboutChannels.*declared"):
        run_probe("LiesAboutChannels", ["seg"], make_toy_data(), tmp_path, protocol="quick")
    assert not list(tmp_path.rglob("*.ckpt.pt")) and not list(tmp_path.rglob("*.json"))


def test_checkpoint_of_another_arch_fails_before_training(tmp_path):
    from safetensors.torch import save_file

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import build_probe_backbone

    other = build_probe_backbone(
        {
            "type": "Sapiens2Probe",
            "arch": dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
        }
    )
    ckpt = tmp_path / "other_arch.safetensors"
    save_file({k: v.contiguous() for k, v in other.model.state_dict().items()}, str(ckpt))
    with pytest.raises(ValueError, match=r"other_arch\.safetensors.*does not fit"):
        run_probe("sapiens2_tiny", ["seg"], make_toy_data(), tmp_path / "out", checkpoint=ckpt,
                  protocol="quick")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*.json"))


def test_missing_task_ground_truth_fails_before_training(tmp_path):
    from benchmarks.probe.api import run_probe

    data = make_toy_data(tasks=("seg",))
    with pytest.raises(FileNotFoundError, match="no 'pose' ground truth"):
        run_probe("pixels", ["seg", "pose"], data, tmp_path, protocol="quick")
    assert not list(tmp_path.rglob("*.json"))


def test_missing_keys_in_samples_are_named(tmp_path):
    from benchmarks.probe.api import run_probe

    data = make_toy_data(tasks=("normal",))
    for split in data.samples["normal"].values():
        for s in split:
            s.pop("mask")
    with pytest.raises(ValueError, match=r"normal ground truth \['mask'\]"):
        run_probe("pixels", ["normal"], data, tmp_path, protocol="quick")


@pytest.mark.slow
def test_interrupted_training_resumes_to_the_same_decoder(tmp_path, monkeypatch):
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.data.source import stack_images
    from benchmarks.probe.features.store import FeatureStore
    from benchmarks.probe.tasks import build_task
    from benchmarks.probe.train.loop import DecoderCheckpoint, train_decoder

    protocol = quick_protocol().replace(iterations=10, shortcut="none")  # the body's own training
    data = make_toy_data()
    task = build_task("albedo", protocol)
    samples = data.load("albedo", "train", protocol)
    bb = build_probe_backbone("pixels")
    feats = FeatureStore(bb, [0], protocol).compute(stack_images(samples, protocol.input_size, "t"))
    tgt = task.targets(samples)
    ref, _ = train_decoder(task, feats, tgt, protocol, seed=0)

    keep = DecoderCheckpoint(tmp_path / "d.ckpt.pt", every=5)
    calls = {"n": 0}
    real_loss = task.loss

    def crashing_loss(*a, **k):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return real_loss(*a, **k)

    monkeypatch.setattr(task, "loss", crashing_loss)
    with pytest.raises(KeyboardInterrupt):
        train_decoder(task, feats, tgt, protocol, seed=0, checkpoint=keep)
    monkeypatch.setattr(task, "loss", real_loss)
    resumed, info = train_decoder(task, feats, tgt, protocol, seed=0, checkpoint=keep)
    assert info["resumed_from"] == 5
    for (k, a), b in zip(ref.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=k)


@pytest.mark.slow
def test_finished_records_are_not_recomputed(tmp_path):
    from benchmarks.probe.api import run_probe

    data = make_toy_data(tasks=("seg",))
    first = run_probe("pixels", ["seg"], data, tmp_path, seeds=(0, 1), protocol="quick")
    stamp = {p: p.stat().st_mtime_ns for p in first if p.name.startswith("seed")}
    folder = tmp_path / "pixels" / quick_protocol().protocol_id("seg") / "seg"
    (folder / "seed1.json").unlink()
    second = run_probe("pixels", ["seg"], data, tmp_path, seeds=(0, 1), protocol="quick")
    assert first == second
    seed0 = folder / "seed0.json"
    assert seed0.stat().st_mtime_ns == stamp[seed0]  # done marker respected
    assert (folder / "seed1.json").is_file()


def test_feature_cache_runs_backbone_once_per_image(tmp_path):
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.features.store import FeatureStore

    protocol = quick_protocol()
    bb = build_probe_backbone("sapiens2_tiny", img_size=protocol.input_size)
    images = torch.rand(5, 3, *protocol.input_size)
    store = FeatureStore(bb, [1, 3], protocol, cache_dir=tmp_path)
    a = store.compute(images)
    store.compute(images[:3])
    assert store.backbone_images == 5
    again = FeatureStore(bb, [1, 3], protocol, cache_dir=tmp_path)  # a later run: disk hits only
    b = again.compute(images)
    assert again.backbone_images == 0 and torch.equal(a.feats, b.feats) and torch.equal(a.cls, b.cls)


def test_loss_grid_phases_cover_every_pixel_shuffle_sub_position():
    """With loss_stride s the loss-grid offset cycles over all s*s phases, so a PixelShuffle(4) head
    has every sub-position trained (a fixed offset trained only 4 of its 16)."""
    import torch

    from benchmarks.probe.readout.base import DecoderShape, get_readout
    from benchmarks.probe.tasks import build_task
    from benchmarks.probe.tasks.base import loss_grid

    protocol = ProbeProtocol()
    task = build_task("seg", protocol)
    seen = torch.zeros(8, 8, dtype=torch.bool)
    ys, xs = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    coords = torch.stack([ys, xs]).float()[None]
    for it in range(protocol.loss_stride**2):
        task.set_step(it)
        picked = loss_grid(coords, (8, 8), protocol.loss_stride, task.loss_offset)
        seen[picked[0, 0].long(), picked[0, 1].long()] = True
    assert seen.all()
    shape = DecoderShape(5, 29, patch_size=16, output_stride=1)
    dec = get_readout("pixelshuffle").build_decoder(shape, protocol)
    maps, _ = dec(torch.zeros(2, 5, 4, 3), (64, 48))
    assert maps.shape == (2, 29, 64, 48)


@pytest.mark.parametrize("name", ["pose", "seg", "normal", "pointmap", "albedo"])
def test_shortcut_reproduces_oracle_features_exactly(name):
    """Features that hold the targets linearly (the oracle's: plain ground truth) are decoded exactly by
    the closed form, whatever the output stride and space-to-depth factor: on the train images, and
    for the dense tasks on held-out images too (the toy's 308 keypoints are one rigid spiral, so its 6
    fit crops do not span every heatmap direction a new crop can take)."""
    from _probe_toy import fit_readouts

    from benchmarks.probe.readout.feature_streams import ReferenceStream
    from benchmarks.probe.readout.shortcut import ReadoutGeometry

    protocol = quick_protocol()
    stream = ReferenceStream("oracle", protocol)
    fits, tasks, loaders = fit_readouts(make_toy_data(), [name], protocol, lambda tasks: stream)
    task, shortcut = tasks[name], fits[name]
    assert shortcut.fit.alpha <= 1e-6 and shortcut.fit.val_r2 > 0.9999
    for split, loader in loaders.items():
        if split == "test" and name == "pose":
            continue
        for batch in loader.batches(loader.groups[0], 0, 1):
            tgt, feats = batch.targets[name], stream(batch, task)
            geom = ReadoutGeometry.of(task, feats, protocol)
            maps = shortcut.maps(feats.feats, geom.out_size, geom.valid_frac)
            # on the GT mask the read-out is the target (a masked task's is the train prior off it)
            want = task.linear_targets(tgt)[:, : task.out_channels]
            if task.masked:
                maps = maps * tgt["mask"][:, None]
            torch.testing.assert_close(maps, want, atol=1e-4 * float(want.abs().max()), rtol=0, msg=split)


def test_linear_decoder_is_the_closed_form_shortcut_alone(tmp_path):
    from _probe_toy import fit_readouts, pixels_stream

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.data.source import stack_images
    from benchmarks.probe.features.store import FeatureStore
    from benchmarks.probe.train.loop import train_decoder

    protocol = quick_protocol().replace(tasks={"seg": {"decoder": "linear"}})
    data = make_toy_data(tasks=("seg",))
    fits, tasks, _ = fit_readouts(data, ["seg"], protocol, pixels_stream(protocol))
    samples = data.load("seg", "train", protocol)
    feats = FeatureStore(build_probe_backbone("pixels"), [0], protocol).compute(
        stack_images(samples, protocol.input_size, "t")
    )
    task = tasks["seg"]
    decoder, info = train_decoder(task, feats, task.targets(samples), protocol, seed=0, shortcut=fits["seg"])
    assert sum(p.numel() for p in decoder.parameters()) == 0 and info["shortcut"]["shuffle"] == 16
    (path,) = run_probe("pixels", ["seg"], data, tmp_path, protocol=protocol)
    from sapiens2.records.results import read_record

    rec = read_record(path)
    assert rec["protocol"]["protocol_id"] == protocol.protocol_id("seg")
    assert rec["config"]["protocol"] == protocol.task_protocol("seg")
    assert rec["config"]["shortcut"]["alpha"] == info["shortcut"]["alpha"]
