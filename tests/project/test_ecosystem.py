"""Ecosystem conventions: one mmengine ``custom_imports`` entry builds models and metrics, and the
distributed form ``torchrun --no-python sapiens2-bench ...`` works inside a project whose own
top-level ``benchmarks`` package would shadow ours under ``torchrun -m benchmarks.cli.main``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_MMENGINE_CONFIG = textwrap.dedent("""
    import sys
    from mmengine.config import Config
    from mmengine.evaluator import Evaluator
    from mmengine.registry import METRICS, MODELS
    from mmengine.utils import import_modules_from_strings

    cfg = Config(dict(custom_imports=dict(imports=[sys.argv[1]], allow_failed_imports=False)))
    import_modules_from_strings(**cfg.custom_imports)
    model = MODELS.build(dict(type="sapiens2.Sapiens2", arch="sapiens2_0.1b", img_size=(32, 32)))
    metric = METRICS.build(dict(type="sapiens2.SegMetric", num_classes=3))
    ev = Evaluator([dict(type="sapiens2.NormalMetric"), dict(type="sapiens2.PoseMetric")])
    print(type(model).__name__, type(metric).__name__, [type(m).__name__ for m in ev.metrics])
""")


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def test_one_custom_import_registers_models_and_metrics(tmp_path):
    """``custom_imports=dict(imports=["evaluators.registry"])``: the one import a config needs (models
    resolve through mmengine's own import of ``sapiens2.registry``; the metrics need this one)."""
    script = tmp_path / "cfg.py"
    script.write_text(_MMENGINE_CONFIG)
    res = subprocess.run([sys.executable, str(script), "evaluators.registry"], capture_output=True,
                         text=True, env=_env(), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    want = ["Sapiens2", "SegMetric", "['NormalMetric',", "'PoseMetric']"]
    assert res.stdout.split()[-4:] == want, res.stdout


@pytest.mark.slow
def test_torchrun_no_python_form_ignores_a_users_benchmarks_package(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    cli = Path(sys.executable).with_name("sapiens2-bench")
    assert torchrun.is_file(), f"torchrun (installed with torch) not found next to {sys.executable}"
    assert cli.is_file(), f"the sapiens2-bench console script is not installed next to {sys.executable}"
    project = tmp_path / "user_project"
    (project / "benchmarks").mkdir(parents=True)
    (project / "benchmarks" / "__init__.py").write_text("raise ImportError('the user project benchmarks')\n")
    env = _env()
    # the -m form picks the user's package from the working directory
    shadowed = subprocess.run([sys.executable, "-m", "benchmarks.cli.main", "--help"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=120)
    assert shadowed.returncode != 0 and "the user project benchmarks" in shadowed.stderr
    data, out = tmp_path / "synth", tmp_path / "out"
    synth = [str(cli), "data", "synth", "--generator", "procedural", "--out", str(data), "--n", "8",
             "--size", "64x48"]
    subprocess.run(synth, cwd=project, env=env, check=True, capture_output=True, timeout=300)
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "--no-python", str(cli), "probe",
           "--backbone", "pixels", "--tasks", "seg", "--data", str(data), "--out", str(out), "--quick",
           "--seeds", "0"]
    res = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    records = [p for p in out.rglob("*.json") if '"run_id"' in p.read_text()]
    assert records, f"no result record under {out}: {sorted(out.rglob('*'))}"
    assert {json.loads(p.read_text())["task"] for p in records} == {"seg"}


TINY = {"sapiens2_0.4b": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}}


def test_public_build_model_with_arch_settings_builds_a_matching_head():
    """build_model(official config name, arch_settings=...): the head's input width follows the substituted
    backbone (it stayed at the official 1024 before), and the model runs."""
    import torch

    from benchmarks.reproduce.tables import config_name
    from sapiens2.models.builder import build_model

    model = build_model(config_name("0.4b", "seg"), arch_settings=TINY).eval()
    assert model.decode_head.in_channels == 32
    with torch.no_grad():
        out = model(torch.rand(1, 3, 64, 48))
    assert torch.isfinite(out if torch.is_tensor(out) else next(iter(out.values()))).all()


def test_random_checkpoint_is_accepted_by_reproduce(tmp_path):
    """random_checkpoint writes where reproduce reads, and reproduce's strict load accepts it."""
    from safetensors import safe_open

    from benchmarks.reproduce.tables import (
        Job,
        build_task_model,
        checkpoint_path,
        config_name,
        random_checkpoint,
    )

    for task in ("seg", "pose", "normal"):
        path = random_checkpoint(tmp_path, "0.4b", task, TINY, input_size=(64, 48), seed=3)
        assert path == checkpoint_path(tmp_path, "0.4b", task)
        with safe_open(str(path), "pt") as f:
            assert f.metadata()["weights"] == "random(seed=3)"
        job = Job("0.4b", task, config_name("0.4b", task), path)
        model = build_task_model(job, TINY, (64, 48))  # strict: a head of the wrong width fails here
        assert model.decode_head.in_channels == 32
