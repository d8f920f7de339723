"""A probe resumed from its checkpoint: the notes keep the final train loss, and a truncated or foreign
decoder checkpoint is named and ignored instead of blocking the run."""

from __future__ import annotations

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.api import run_probe  # noqa: E402
from sapiens2.records.results import read_record  # noqa: E402

SEG = ("seg",)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    (path,) = run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path_factory.mktemp("clean"),
                        protocol="quick")
    return read_record(path)


def test_resumed_at_the_last_iteration_keeps_the_final_loss(clean, tmp_path):
    (path,) = run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
    path.unlink()  # killed after the last checkpoint, before the record
    (again,) = run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
    notes = read_record(again)["notes"]
    assert "nan" not in notes and notes.startswith("decoder trained from iteration ")
    assert notes.split("final train loss ")[1] == clean["notes"].split("final train loss ")[1]


@pytest.mark.parametrize("damage", ["truncated", "list"])
def test_a_damaged_decoder_checkpoint_is_named_and_ignored(clean, tmp_path, capsys, damage):
    (path,) = run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
    path.unlink()
    ckpt = path.with_suffix(".ckpt.pt")
    if damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    else:
        torch.save([1, 2], ckpt)
    capsys.readouterr()
    (again,) = run_probe("pixels", SEG, make_toy_data(tasks=SEG, seed=0), tmp_path, protocol="quick")
    err = capsys.readouterr().err
    assert f"{ckpt} is not a readable decoder checkpoint" in err
    rec = read_record(again)
    assert rec["metrics"] == clean["metrics"] and rec["notes"].startswith("decoder trained from iteration 0")
