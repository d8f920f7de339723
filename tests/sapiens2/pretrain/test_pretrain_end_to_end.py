"""``sapiens2-bench pretrain`` end to end on the tiny ``smoke_tiny`` recipe (32x24 images): two runs
give the same losses bit for bit, resume == uninterrupted, the exported backbone loads with
``build_model`` + ``load_checkpoint`` and as a probe backbone, the objective ablations run, and bad
input (no images, an unknown arch or type, another config's checkpoint) fails before any step.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sapiens2.errors import BenchError
from sapiens2.kernels import kernel_mismatch
from sapiens2.pretrain.recipes import config_hash, get_recipe

ROOT = Path(__file__).resolve().parents[3]


def _cli(*argv) -> int:
    from benchmarks.cli.main import main

    return main(["pretrain", *map(str, argv)])


def _smoke(data, out, *extra) -> int:
    """The smoke recipe through the CLI; returns the exit code."""
    return _cli("--recipe", "smoke_tiny", "--data", data, "--out", out, "--no-progress", *extra)


def _write_images(folder: Path, n: int = 6, size=(24, 32), seed: int = 0) -> Path:
    """Small structured RGB images (smooth gradients plus a random rectangle)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    for i in range(n):
        img = np.stack([xx / w, yy / h, np.full((h, w), rng.random())], -1)
        y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
        img[y0 : y0 + h // 3, x0 : x0 + w // 3] = rng.random(3)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i:03d}.png")
    return folder


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return _write_images(tmp_path_factory.mktemp("pt_images"))


@pytest.fixture(scope="module")
def smoke_run(images, tmp_path_factory) -> Path:
    """The smoke recipe run uninterrupted through the CLI (2 steps)."""
    out = tmp_path_factory.mktemp("pt_full")
    assert _smoke(images, out) == 0
    return out


def _losses(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]



# ---------------------------------------------------------------------------------- end to end
def test_two_step_run_is_deterministic(smoke_run, images, tmp_path):
    from sapiens2.pretrain import pretrain

    again = pretrain(get_recipe("smoke_tiny"), images, tmp_path / "again", progress=False)
    first = _losses(smoke_run)
    assert [r["step"] for r in first] == [0, 1]
    assert first == _losses(tmp_path / "again")  # bit for bit (JSON floats round-trip exactly)
    assert all(set(r) >= {"loss", "mae", "cl", "koleo"} for r in first)
    assert (smoke_run / "backbone.safetensors").read_bytes() == again.backbone.read_bytes()


def test_resume_equals_uninterrupted(smoke_run, images, tmp_path):
    out = tmp_path / "resumed"
    assert _smoke(images, out, "--stop-at", 1) == 0
    assert [r["step"] for r in _losses(out)] == [0]
    assert _smoke(images, out, "--resume") == 0
    assert _losses(out) == _losses(smoke_run)
    assert (out / "backbone.safetensors").read_bytes() == (smoke_run / "backbone.safetensors").read_bytes()
    a = torch.load(out / "train_state.pt", weights_only=True)
    b = torch.load(smoke_run / "train_state.pt", weights_only=True)
    assert a["step"] == b["step"] == 2
    for k, v in b["model"].items():
        assert torch.equal(a["model"][k], v), k


def test_export_loads_with_build_model_and_probe(smoke_run):
    from benchmarks.probe.backbones.presets import backbone_label, build_probe_backbone
    from sapiens2.models.builder import build_model
    from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file

    card = json.loads((smoke_run / "backbone.json").read_text())
    weights = smoke_run / "backbone.safetensors"
    state = load_state_dict_file(weights)
    assert card["step"] == 2 and card["exported"] == "teacher" and card["recipe"] == "smoke_tiny"
    assert card["config_hash"] == config_hash(get_recipe("smoke_tiny"))
    model = build_model(card["backbone_config"])
    report = load_checkpoint(model, weights)
    assert report.loaded == len(state) and not report.missing
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    spec = json.dumps(card["probe_backbone"])
    probe = build_probe_backbone(spec, checkpoint=str(weights), img_size=(32, 24))
    assert backbone_label(spec) == "pretrain_smoke_tiny"
    assert all(torch.equal(probe.model.state_dict()[k], v) for k, v in state.items())
    feats, cls = probe.forward_layers(torch.randn(1, 3, 32, 24), [-1])
    assert feats[0].shape == (1, 64, 4, 3) and cls[0].shape == (1, 64)


def test_ablation_variants_run(images, tmp_path):
    from sapiens2.pretrain import pretrain

    for name, weights in (("mae_only", {"mae": 1.0, "cl": 0.0, "koleo": 0.0}),
                          ("cl_only", {"mae": 0.0, "cl": 1.0, "koleo": 0.04})):
        cfg = get_recipe("smoke_tiny")
        cfg["model"]["loss_weights"] = weights
        cfg["steps"] = 1
        res = pretrain(cfg, images, tmp_path / name, progress=False)
        terms = {k for k in res.records[0] if k in ("mae", "cl", "koleo")}
        assert terms == {k for k, v in weights.items() if v > 0}, name
        card = json.loads((tmp_path / name / "backbone.json").read_text())
        assert card["exported"] == ("student" if name == "mae_only" else "teacher"), name  # no teacher


def test_frozen_prototypes_get_no_update_for_their_steps(images, tmp_path):
    from sapiens2.pretrain import pretrain
    from sapiens2.pretrain.state import load_state

    protos = {}
    for frozen in (0, 2, 1):
        cfg = get_recipe("smoke_tiny")
        cfg["optim"]["freeze_prototypes_steps"] = frozen
        out = tmp_path / f"frozen{frozen}"
        pretrain(cfg, images, out, progress=False)
        state = load_state(out / "train_state.pt", config_hash(cfg), 1)["model"]
        protos[frozen] = state["student.head.prototypes"]
    torch.manual_seed(get_recipe("smoke_tiny")["seed"])
    from sapiens2.pretrain.trainer import build_pretrainer

    init = build_pretrainer(get_recipe("smoke_tiny")).student.head.prototypes.detach()
    assert torch.equal(protos[2], init)  # frozen for both steps
    assert not torch.equal(protos[0], init) and not torch.equal(protos[1], init)
    assert not torch.equal(protos[1], protos[0])  # step 0 frozen, step 1 trained


def test_sinkhorn_centering_runs_and_changes_only_the_distillation(images, tmp_path):
    from sapiens2.pretrain import pretrain

    rows = {}
    for mode in ("momentum", "sinkhorn"):
        cfg = get_recipe("smoke_tiny")
        cfg["model"]["teacher_centering"] = mode
        cfg["steps"] = 1
        rows[mode] = pretrain(cfg, images, tmp_path / mode, progress=False).records[0]
    assert math.isfinite(rows["sinkhorn"]["cl"]) and rows["sinkhorn"]["cl"] != rows["momentum"]["cl"]
    assert rows["sinkhorn"]["mae"] == rows["momentum"]["mae"]  # same first step otherwise
    base = get_recipe("smoke_tiny")
    sinkhorn = {**base, "model": {**base["model"], "teacher_centering": "sinkhorn"}}
    assert config_hash(sinkhorn) != config_hash(base)


def test_freeze_prototypes_steps_is_checked_and_hashed_only_when_set():
    cfg = get_recipe("smoke_tiny")
    assert "freeze_prototypes_steps" not in json.dumps(
        {k: v for k, v in cfg.items() if k != "optim"}) and cfg["optim"]["freeze_prototypes_steps"] == 0
    assert config_hash({**cfg, "optim": {**cfg["optim"], "freeze_prototypes_steps": 0}}) == config_hash(cfg)
    assert config_hash({**cfg, "optim": {**cfg["optim"], "freeze_prototypes_steps": 5}}) != config_hash(cfg)
    with pytest.raises(BenchError, match="freeze_prototypes_steps"):
        config_hash({**cfg, "optim": {**cfg["optim"], "freeze_prototypes_steps": -1}})


def test_cli_lists_and_shows_recipes(capsys):
    assert _cli("--list-recipes") == 0
    listing = capsys.readouterr().out
    assert "smoke_tiny" in listing and config_hash(get_recipe("smoke_tiny")) in listing
    assert _cli("--recipe", "smoke_tiny", "--show-config") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["config_hash"] == config_hash(get_recipe("smoke_tiny"))


def test_config_hash_ignores_name_and_run_only():
    cfg = get_recipe("smoke_tiny")
    renamed = {**cfg, "name": "other", "run": {**cfg["run"], "checkpoint_every": 7}}
    assert config_hash(renamed) == config_hash(cfg)
    assert config_hash({**cfg, "seed": 1}) != config_hash(cfg)


# ------------------------------------------------------------------------------------ bad input
def _no_step_ran(out: Path) -> bool:
    return not (out / "train_state.pt").exists() and not (out / "log.jsonl").exists()


def test_folder_without_images_fails_before_any_step(tmp_path, capsys):
    empty = tmp_path / "empty"
    (empty / "images").mkdir(parents=True)
    (empty / "images" / "notes.txt").write_text("no images here")
    assert _cli("--recipe", "smoke_tiny", "--data", empty, "--out", tmp_path / "o", "--no-progress") == 1
    err = capsys.readouterr().err
    assert "holds no image files" in err and str(empty / "images") in err
    assert _no_step_ran(tmp_path / "o")
    assert _cli("--recipe", "smoke_tiny", "--data", tmp_path / "missing", "--out", tmp_path / "o") == 1
    assert "does not exist" in capsys.readouterr().err


def test_unknown_arch_and_unknown_key_fail_before_any_step(images, tmp_path, capsys):
    cfg = {"name": "bad_arch", "model": {"backbone": {"type": "Sapiens2", "arch": "sapiens2_7b"}}}
    path = tmp_path / "bad_arch.json"
    path.write_text(json.dumps(cfg))
    assert _cli("--config", path, "--data", images, "--out", tmp_path / "o", "--no-progress") == 1
    err = capsys.readouterr().err
    assert "sapiens2_7b" in err and "known archs" in err and "bad_arch" in err
    assert _no_step_ran(tmp_path / "o")
    path.write_text(json.dumps({"optim": {"learning_rate": 1.0}}))
    assert _cli("--config", path, "--data", images, "--out", tmp_path / "o") == 1
    assert "optim.learning_rate" in capsys.readouterr().err
    assert _cli("--recipe", "no_such_recipe", "--data", images, "--out", tmp_path / "o") == 1
    assert "smoke_tiny" in capsys.readouterr().err
    path.write_text(json.dumps({"model": {"decoder": {"type": "MAEDecodr"}}}))
    assert _cli("--config", path, "--data", images, "--out", tmp_path / "o") == 1
    err = capsys.readouterr().err
    assert "'MAEDecodr'" in err and "MAEDecoder" in err and "Sapiens2" in err
    assert _no_step_ran(tmp_path / "o")


def test_bad_crop_size_fails_before_any_step(images, tmp_path):
    from sapiens2.pretrain import pretrain

    cfg = get_recipe("smoke_tiny")
    cfg["crops"]["local_size"] = [12, 12]  # not a multiple of the patch size 8
    with pytest.raises(BenchError, match=r"crops.local_size .*multiples of 8"):
        pretrain(cfg, images, tmp_path / "o", progress=False)
    assert _no_step_ran(tmp_path / "o")


def test_resume_from_another_configs_checkpoint_fails(images, tmp_path, capsys):
    out = tmp_path / "o"
    assert _smoke(images, out, "--stop-at", 1) == 0
    state_before = (out / "train_state.pt").read_bytes()
    other = get_recipe("smoke_tiny")
    other["optim"]["lr"] = 5e-4
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    assert _cli("--config", path, "--data", images, "--out", out, "--resume", "--no-progress") == 1
    err = capsys.readouterr().err
    assert "cannot resume" in err and "smoke_tiny" in err and config_hash(other) in err
    assert (out / "train_state.pt").read_bytes() == state_before
    assert [r["step"] for r in _losses(out)] == [0]
    # Starting over an existing run without --resume is refused too.
    assert _smoke(images, out) == 1
    assert "--resume" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ DDP
@pytest.mark.slow
@pytest.mark.ddp
def test_torchrun_two_processes(images, tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    assert torchrun.is_file(), f"torchrun (installed with torch) not found next to {sys.executable}"
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "benchmarks.cli.main", "pretrain",
           "--recipe", "smoke_tiny", "--data", str(images), "--out", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = _losses(out)
    assert [r["step"] for r in rows] == [0, 1] and all(math.isfinite(r["loss"]) for r in rows)
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["world_size"] == 2


def test_model_card_of_a_finished_run(smoke_run, images, tmp_path):
    from sapiens2.pretrain.card import build_card, card_markdown, ship
    from sapiens2.utils_io import file_sha256

    card = build_card(smoke_run, "tiny_shipped", {"wall_s": 60.0, "cpu_s": 90.0, "date": "2026-11-30"})
    assert card["sha256"] == file_sha256(smoke_run / "backbone.safetensors")
    assert card["config_hash"] == config_hash(get_recipe("smoke_tiny")) and card["images_seen"] == 2 * 4
    assert [r["step"] for r in card["first_steps"]] == [0, 1] and card["last_step"]["step"] == 1
    assert card["probe_backbone"]["name"] == "tiny_shipped"
    assert kernel_mismatch(card["timing"]["kernels"]) is None  # the key of the machine that built it
    md = card_markdown(card)
    assert card["sha256"] in md and "1.0 min" in md and "0.8 min" in md  # wall; CPU / 2 cores
    dest = tmp_path / "weights"
    dest.mkdir()
    shipped = ship(smoke_run, "tiny_shipped", dest, card["timing"])
    assert file_sha256(shipped) == card["sha256"] and (dest / "tiny_shipped.md").is_file()
    # an unfinished run has no card
    out = tmp_path / "partial"
    assert _smoke(images, out, "--stop-at", 1) == 0
    with pytest.raises(BenchError, match="not finished"):
        build_card(out, "partial")
