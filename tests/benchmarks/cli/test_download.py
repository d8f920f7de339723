"""``sapiens2-bench download`` against a local fake hub (no network), offline failures, the key check."""

from __future__ import annotations

import hashlib
import json
import os
import socket

import pytest
import torch
from _fake_hub import FakeHub  # noqa: E402

from benchmarks.cli.main import main  # noqa: E402

TINY = {"sapiens2_0.4b": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}}
SEG_REPO = "facebook/sapiens2-seg-0.4b"
PRE_REPO = "facebook/sapiens2-pretrain-0.4b"


def _safetensors(state: dict) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in state.items()})


@pytest.fixture(scope="module")
def tiny_files():
    """Bytes of a tiny random seg model and a tiny pretrained backbone (the TINY settings)."""
    from benchmarks.reproduce.tables import _adapt_config, task_config
    from sapiens2.models.backbones.common import OFFICIAL_BACKBONES
    from sapiens2.models.builder import build_model

    torch.manual_seed(0)
    seg = build_model(_adapt_config(task_config("0.4b", "seg"), TINY, (64, 48)))
    backbone = build_model(dict(OFFICIAL_BACKBONES["sapiens2_0.4b"], arch=TINY["sapiens2_0.4b"]))
    return _safetensors(seg.state_dict()), _safetensors(backbone.state_dict())


@pytest.fixture()
def env(tmp_path, monkeypatch):
    """No hub reachable unless a test starts one; an empty cache and checkpoint root per test."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    return {"root": tmp_path / "ckpts", "cache": tmp_path / "cache"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connecting is refused


def _download(env, *args) -> int:
    return main(["download", "--checkpoint-root", str(env["root"]), "--cache-dir", str(env["cache"]),
                 "--arch-settings", json.dumps(TINY), *args])


def _files(folder) -> list:
    return sorted(p for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.hf
def test_download_links_verified_file_and_reproduce_finds_it(env, tiny_files, monkeypatch, capsys):
    seg, _ = tiny_files
    repos = {SEG_REPO: {"README.md": b"# card", "sapiens2_0.4b_seg.safetensors": seg,
                        "model.safetensors": b"x"}}
    with FakeHub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert _download(env, "--tasks", "seg", "--sizes", "0.4b") == 0
    out = capsys.readouterr().out
    target = env["root"] / "seg" / "sapiens2_0.4b_seg.safetensors"
    assert target.is_symlink() and target.read_bytes() == seg
    assert str(env["cache"]) in os.path.realpath(target)
    assert f"sha256 {hashlib.sha256(seg).hexdigest()[:12]}" in out
    assert "keys and shapes match the official model" in out
    assert ("GET", f"/{SEG_REPO}/resolve/main/model.safetensors") not in hub.requests  # only the checkpoint
    from benchmarks.reproduce.tables import plan

    jobs, _ = plan("seg", env["root"], None, ["0.4b"])
    assert [j.checkpoint for j in jobs] == [target]
    # a second run finds it in place; offline, a fresh root is filled from the cache (blob = its sha256)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env2 = dict(env, root=env["root"].parent / "ckpts2")
    assert _download(env2, "--tasks", "seg", "--sizes", "0.4b") == 0
    out = capsys.readouterr().out
    assert "HF_HUB_OFFLINE" in out and "sha256" in out
    assert (env2["root"] / "seg" / "sapiens2_0.4b_seg.safetensors").read_bytes() == seg


@pytest.mark.hf
def test_download_picks_the_single_safetensors_and_copies(env, tiny_files, monkeypatch, capsys):
    _, backbone = tiny_files
    repos = {PRE_REPO: {"README.md": b"# card", "weights/backbone_v2.safetensors": backbone,
                        "model.safetensors": b"transformers copy"}}
    with FakeHub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert _download(env, "--pretrain", "--sizes", "0.4b", "--copy") == 0
    out = capsys.readouterr().out
    target = env["root"] / "pretrain" / "sapiens2_0.4b_pretrain.safetensors"
    assert "file weights/backbone_v2.safetensors" in out  # says what it chose
    assert target.is_file() and not target.is_symlink() and target.read_bytes() == backbone


@pytest.mark.hf
def test_download_detector_keeps_its_file_name(env, monkeypatch, capsys):
    name = "rtmdet_person.pth"  # the fake repository's name; the real one is listed by the hub
    repos = {"facebook/sapiens-pose-bbox-detector": {name: b"not a real detector", "README.md": b"x"}}
    with FakeHub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert _download(env, "--detector") == 0
    out = capsys.readouterr().out
    assert (env["root"] / "detector" / name).read_bytes() == b"not a real detector"
    assert "sha256" in out and "keys and shapes" not in out  # a .pth is never loaded here


@pytest.mark.hf
def test_download_dry_run_fetches_nothing(env, tiny_files, monkeypatch, capsys):
    seg, _ = tiny_files
    with FakeHub({SEG_REPO: {"sapiens2_0.4b_seg.safetensors": seg}}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert _download(env, "--tasks", "seg", "--sizes", "0.4b", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "sapiens2_0.4b_seg.safetensors" in out and str(env["root"] / "seg") in out
    assert not any("/resolve/" in path for _, path in hub.requests)
    assert _files(env["root"]) == []


@pytest.mark.hf
@pytest.mark.parametrize("fault", ["checksum", "keys"])
def test_download_refuses_a_file_that_fails_a_check(env, tiny_files, monkeypatch, capsys, fault):
    seg, _ = tiny_files
    if fault == "keys":
        from safetensors.torch import load

        state = load(seg)
        state.pop("decode_head.conv_seg.weight")
        seg = _safetensors(state)
    lfs = {(SEG_REPO, "sapiens2_0.4b_seg.safetensors"): "0" * 64} if fault == "checksum" else None
    with FakeHub({SEG_REPO: {"sapiens2_0.4b_seg.safetensors": seg}}, lfs) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert _download(env, "--tasks", "seg", "--sizes", "0.4b") == 1
    captured = capsys.readouterr()
    expected = "sha256" if fault == "checksum" else "1 missing key(s): decode_head.conv_seg.weight"
    assert expected in captured.out and SEG_REPO in captured.err
    assert _files(env["root"]) == []  # nothing placed, not even a temporary file


@pytest.mark.hf
@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable"])
def test_download_offline_fails_clearly(env, monkeypatch, capsys, how):
    if how == "HF_HUB_OFFLINE":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert _download(env, "--tasks", "seg,pose", "--sizes", "0.4b") == 1
    captured = capsys.readouterr()
    for repo in (SEG_REPO, "facebook/sapiens2-pose-0.4b"):
        assert f"{repo}: cannot reach the Hugging Face Hub" in captured.out and repo in captured.err
    assert ("HF_HUB_OFFLINE=1 is set" if how == "HF_HUB_OFFLINE" else "no network") in captured.out
    assert "To place it by hand" in captured.out
    assert str(env["root"] / "seg" / "sapiens2_0.4b_seg.safetensors") in captured.out
    assert _files(env["root"]) == []


def test_download_rejects_what_has_no_public_repository(env, capsys):
    assert _download(env, "--tasks", "albedo", "--sizes", "0.4b") == 1
    assert "no public Sapiens2 'albedo' checkpoints" in capsys.readouterr().err
    assert _download(env, "--tasks", "seg", "--sizes", "1b-4k") == 1
    assert "no public Sapiens2 seg checkpoint of size '1b-4k'" in capsys.readouterr().err
    assert _download(env) == 1
    assert "nothing selected" in capsys.readouterr().err


def test_key_check_uses_the_official_key_lists(shared_dir):
    """What download compares with is exactly the official state-dict keys and shapes."""
    from benchmarks.reproduce.hub import expected_shapes
    from benchmarks.reproduce.sources import HUB_TASKS, PRETRAIN_SIZES, TASK_SIZES
    from benchmarks.reproduce.tables import config_name

    backbones = json.loads((shared_dir / "reference" / "official_backbones.json").read_text())["archs"]
    for size in PRETRAIN_SIZES:
        want = backbones[f"sapiens2_{size.replace('-', '_')}"]["state_dict"]
        assert expected_shapes("pretrain", size) == {k: tuple(v) for k, v in want.items()}, size
    tasks = json.loads((shared_dir / "reference" / "official_task_models.json").read_text())
    for task in HUB_TASKS:
        for size in TASK_SIZES:
            want = tasks[config_name(size, task)]["state_dict"]
            assert expected_shapes(task, size) == {k: tuple(v) for k, v in want.items()}, (task, size)
