"""Published records carry no absolute local path: the weights by file name (or relative to the declared
root) and hash, the command line's paths the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sapiens2.records.paths import ROOT_ENV, public_command, public_path, public_weights


def test_paths_are_relative_to_the_declared_root_else_the_file_name(tmp_path, monkeypatch):
    monkeypatch.delenv(ROOT_ENV, raising=False)
    weights = tmp_path / "ckpt" / "w.safetensors"
    assert public_path(weights) == "w.safetensors"
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    assert public_path(weights) == "ckpt/w.safetensors"
    assert public_path("/elsewhere/x.pt") == "x.pt"
    assert public_weights("none") == "none" and public_weights("random(seed=0)") == "random(seed=0)"
    assert public_command(["/opt/venv/bin/sapiens2-bench", "probe", "--weights", str(weights),
                           f"--out={tmp_path / 'o'}", f"sapiens2_0.4b={weights}"]) == [
        "sapiens2-bench", "probe", "--weights", "ckpt/w.safetensors", "--out=o",
        "sapiens2_0.4b=ckpt/w.safetensors"]


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory):
    from sapiens2.datasets.synth import generate_split

    return generate_split(tmp_path_factory.mktemp("d") / "d0", n=6, seed=0, size=(64, 48), progress=False)


def test_a_probe_record_names_its_weights_by_file_and_hash_only(tmp_path, tiny_split, monkeypatch):
    from safetensors.torch import save_file

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import build_probe_backbone, resolve_backbone_cfg
    from benchmarks.probe.protocol import quick_protocol
    from benchmarks.probe.records.runkey import weights_sha256

    monkeypatch.delenv(ROOT_ENV, raising=False)
    bb = build_probe_backbone(resolve_backbone_cfg("sapiens2_tiny"))
    private = tmp_path / "home" / "alice" / "ckpt"
    private.mkdir(parents=True)
    state = {k: v.contiguous() for k, v in bb.model.state_dict().items()}
    save_file(state, str(private / "tiny.safetensors"))
    protocol = quick_protocol().replace(tasks={"seg": {"decoder": "linear"}})
    monkeypatch.setattr("sys.argv", ["/opt/venv/bin/sapiens2-bench", "probe", "--weights",
                                     str(private / "tiny.safetensors")])
    (path,) = run_probe("sapiens2_tiny", "seg", tiny_split, tmp_path / "out", protocol=protocol,
                        checkpoint=str(private / "tiny.safetensors"))
    text = Path(path).read_text()
    assert str(tmp_path) not in text and "alice" not in text
    rec = json.loads(text)
    assert rec["model"]["weights"] == "tiny.safetensors"
    assert rec["config"]["backbone"]["weights_sha256"] == weights_sha256(bb)
    assert rec["provenance"]["command"][-1] == "tiny.safetensors"
