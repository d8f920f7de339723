"""User backbones from the CLI: the docs' worked plug-in example through ``--include``, ``module:Class``
and JSON specs; clear errors for bad ``module:Class`` names before any work; ``--list-backbones``;
``--weights`` (with ``--checkpoint`` as its deprecated alias)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split(
        "probe-cli", 8, (64, 48), 2, root=tmp_path_factory.mktemp("synth"), progress=False
    )


def docs_plugin_example() -> str:
    """The Python block of docs/probing.md's 'Adding a backbone' section, verbatim."""
    text = (ROOT / "docs" / "probing.md").read_text(encoding="utf-8")
    section = text.split("### Adding a backbone", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.slow
def test_docs_plugin_example_runs_from_the_cli(synth, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "my_backbones.py").write_text(docs_plugin_example(), encoding="utf-8")
    out = tmp_path / "out"
    common = ["--tasks", "albedo", "--data", str(synth), "--quick"]
    runs = {
        "name": ["--include", str(plugins / "my_backbones.py"), "--backbone", "MeanColourPatches"],
        "module": ["--include", str(plugins), "--backbone", "my_backbones:MeanColourPatches"],
        "json": [
            "--include",
            str(plugins / "my_backbones.py"),
            "--backbone",
            '{"type": "MeanColourPatches"}',
        ],
    }
    # one process (a fresh registry), the CLI's entry point called once per route
    script = (
        "import json, sys\n"
        "from benchmarks.cli.main import main\n"
        "runs = json.loads(sys.argv[1])\n"
        "codes = {k: main(['probe', *argv, '--out', sys.argv[2] + '/' + k]) for k, argv in runs.items()}\n"
        "print(json.dumps(codes))\n"
    )
    runs = {k: v + common for k, v in runs.items()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(runs), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {k: 0 for k in runs}, proc.stderr[-3000:]
    from sapiens2.records.results import read_record

    for route in runs:
        (path,) = (out / route).rglob("seed0.json")
        rec = read_record(path)
        assert rec["model"]["backbone"] == "MeanColourPatches" and rec["task"] == "albedo"
        # a backbone without parameters is labelled as having no weights, not as a random init
        assert rec["model"]["weights"] == "none" and rec["model"]["params"] is None


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module_xyz:Thing", "cannot import module 'no_such_module_xyz'"),
        (
            "benchmarks.probe.backbones.pixels:Nope",
            "unknown probe backbone class in .*'Nope'; known: PixelPatches",
        ),
        (
            "benchmarks.probe.protocol:ProbeProtocol",
            "ProbeProtocol is the class ProbeProtocol, not a probe backbone",
        ),
        ('{"type": "benchmarks.probe.protocol:default_protocol"}', "is a function, not a probe backbone"),
        ("no_such_backbone", "unknown probe backbone 'no_such_backbone'; known: .*gt-oracle"),
    ],
)
def test_bad_backbone_fails_before_any_step(spec, message, tmp_path, capsys):
    from benchmarks.cli.main import main

    data = tmp_path / "never_read"  # the data would fail too: the backbone is checked first
    code = main(
        ["probe", "--backbone", spec, "--tasks", "seg", "--data", str(data), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 1 and re.search(message, err), err
    assert not (tmp_path / "o").exists()


@pytest.mark.hf  # dinov2_small's parameter count is read from its transformers config
def test_list_backbones_shows_family_params_and_weights(capsys):
    from benchmarks.cli.main import main

    assert main(["probe", "--list-backbones"]) == 0
    rows = {line.split()[0]: line.split(None, 3) for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["gt-oracle"][1:3] == ["oracle", "-"] and rows["gt-oracle"][3].startswith("none")
    assert rows["pixels"][1:] == ["pixels", "-", "none"]
    assert rows["sapiens2_0.1b"][1:3] == ["sapiens2", "0.114B"] and "needed" in rows["sapiens2_0.1b"][3]
    assert rows["dinov2_small"][1:3] == ["dinov2", "22.06M"]


@pytest.mark.slow
def test_weights_flag_and_its_deprecated_alias(synth, tmp_path, capsys):
    from safetensors.torch import save_file

    from benchmarks.cli.main import main
    from benchmarks.probe.backbones import build_probe_backbone
    from sapiens2.records.results import read_record

    bb = build_probe_backbone("sapiens2_tiny", init_seed=3)
    ckpt = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in bb.model.state_dict().items()}, str(ckpt))
    args = ["probe", "--backbone", "sapiens2_tiny", "--tasks", "seg", "--data", str(synth), "--quick"]
    assert main([*args, "--weights", str(ckpt), "--out", str(tmp_path / "o")]) == 0
    (path,) = (tmp_path / "o").rglob("seed0.json")
    first = path.read_bytes()
    assert read_record(path)["model"]["weights"] == ckpt.name  # never the absolute local path
    capsys.readouterr()
    # the alias names the same weights: the same run, so the record is a done marker
    assert main([*args, "--checkpoint", str(ckpt), "--out", str(tmp_path / "o")]) == 0
    assert "--checkpoint is deprecated; use --weights" in capsys.readouterr().err
    assert path.read_bytes() == first
    # `run`'s NAME=PATH spelling works too
    assert main([*args, "--weights", f"sapiens2_tiny={ckpt}", "--out", str(tmp_path / "o")]) == 0
    assert path.read_bytes() == first


def test_weight_free_backbones_are_told_apart_from_random_inits():
    from benchmarks.probe.backbones import build_probe_backbone, weight_free

    assert weight_free("pixels") and weight_free("gt-oracle") and not weight_free("sapiens2_tiny")
    assert build_probe_backbone("pixels").weights == "none"
    assert build_probe_backbone("sapiens2_tiny").weights == "random(seed=0)"
