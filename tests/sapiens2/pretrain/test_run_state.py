"""Pretraining reliability: one writer per --out, a run identity that a resume must match, no bad
step applied or saved, and a log whose cut-off last line does not block --resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sapiens2.errors import BenchError  # noqa: E402
from sapiens2.output_lock import LOCK_NAME, OutputBusyError, output_lock  # noqa: E402
from sapiens2.pretrain import trainer  # noqa: E402
from sapiens2.pretrain.recipes import get_recipe  # noqa: E402
from sapiens2.pretrain.state import STATE_FILE, load_state, save_state  # noqa: E402
from tests.sapiens2.pretrain.test_pretrain_end_to_end import _write_images  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(images, out, **kw):
    return trainer.pretrain(get_recipe("smoke_tiny"), images, out, progress=False, **kw)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return _write_images(tmp_path_factory.mktemp("rel_images"))


def test_a_pretrain_into_a_locked_out_stops_before_writing(images, tmp_path):
    out = tmp_path / "out"
    with output_lock(out, "pretrain other"):
        with pytest.raises(OutputBusyError, match="pretrain other"):
            _run(images, out)
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]


def test_a_second_pretrain_started_during_the_first_fails(images, tmp_path, monkeypatch):
    out = tmp_path / "out"
    set_lr, seen = trainer.set_lr, {}

    def set_lr_and_race(optimizer, lr):
        if not seen:
            seen["second"] = "started"
            try:
                _run(images, out)
                seen["second"] = "exit 0"
            except OutputBusyError as e:
                seen["second"] = str(e)
        return set_lr(optimizer, lr)

    monkeypatch.setattr(trainer, "set_lr", set_lr_and_race)
    _run(images, out)
    assert "another run is writing into this folder" in seen["second"]
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [0, 1]  # one run's rows, once each


def test_resume_with_other_images_is_refused_naming_the_data(images, tmp_path):
    out = tmp_path / "out"
    _run(images, out, stop_at=1)
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["num_images"] == 6 and len(run["data_sha256"]) == 64
    other = _write_images(tmp_path / "other", seed=3)
    with pytest.raises(BenchError, match="data_sha256"):
        _run(other, out, resume=True)
    result = _run(images, out, resume=True)  # the same images resume
    card = json.loads((out / "backbone.json").read_text())
    assert card["run"] == run and result.end_step == 2
    keys = {json.loads(line)["run_key"] for line in (out / "log.jsonl").read_text().splitlines()}
    assert len(keys) == 1


def test_a_state_without_identity_is_not_resumed(images, tmp_path):
    out = tmp_path / "out"
    _run(images, out, stop_at=1)
    state = torch.load(out / STATE_FILE, weights_only=True)
    del state["run"]
    torch.save(state, out / STATE_FILE)
    with pytest.raises(BenchError, match="no run identity"):
        _run(images, out, resume=True)


def test_a_non_finite_gradient_is_neither_applied_nor_checkpointed(images, tmp_path, monkeypatch):
    out = tmp_path / "out"
    stepped = []
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, clip: torch.tensor(float("nan")))
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, *a, **k: stepped.append(1))
    with pytest.raises(BenchError, match="non-finite gradient norm"):
        _run(images, out, stop_at=1)
    assert not stepped and not (out / STATE_FILE).exists()


def test_a_non_finite_state_is_never_written(images, tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    with torch.no_grad():
        model.weight[0, 0] = float("inf")
    path = tmp_path / STATE_FILE
    with pytest.raises(BenchError, match="non-finite weights"):
        save_state(path, model=model, optimizer=opt, step=3, config={}, config_hash="x", world_size=1)
    assert not path.exists()


def test_a_cut_off_last_log_line_does_not_block_resume(images, tmp_path, capsys):
    out = tmp_path / "out"
    _run(images, out, stop_at=1)
    with open(out / "log.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 1, "loss": 0.')  # killed in the middle of writing a row
    result = _run(images, out, resume=True)
    assert result.end_step == 2 and "partial last line" in capsys.readouterr().out
    steps = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert steps == [0, 1]


def test_a_malformed_log_line_is_named(images, tmp_path):
    out = tmp_path / "out"
    _run(images, out, stop_at=1)
    (out / "log.jsonl").write_text("garbage\n" + (out / "log.jsonl").read_text())
    with pytest.raises(BenchError, match=r"log\.jsonl: line 1"):
        _run(images, out, resume=True)
    chash = trainer.config_hash(trainer.resolve_config(get_recipe("smoke_tiny")))
    assert load_state(out / STATE_FILE, chash, 1)["step"] == 1  # the state itself is untouched


@pytest.mark.parametrize("optim, why", [
    ({"lr": "fast"}, r"optim\.lr must be a finite number >= 0, got 'fast'"),
    ({"clip_grad": float("nan")}, r"optim\.clip_grad must be"),
    ({"betas": [0.9, 1.5]}, r"optim\.betas must be two numbers"),
])
def test_a_recipe_with_a_non_numeric_optimiser_setting_is_named(optim, why, images, tmp_path, capsys):
    cfg = tmp_path / "recipe.json"
    cfg.write_text(json.dumps({"name": "bad", "optim": optim}))  # NaN is written as the JSON extension NaN
    from benchmarks.cli.main import main

    assert main(["pretrain", "--config", str(cfg), "--data", str(images), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 1
    import re

    assert re.search(why, capsys.readouterr().err)
    assert not (tmp_path / "o").exists()
