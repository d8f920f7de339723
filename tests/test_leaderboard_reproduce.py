"""``reproduce`` (table1, task tables on self-made checkpoints + synthetic data) and ``run --quick``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.cli.main import main
from leaderboard.results import load_records, read_record

TINY = {"sapiens2_0.4b": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}}
INPUT = (64, 48)


@pytest.fixture(scope="module")
def synth_split(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "split"
    assert main(["data", "synth", "--out", str(out), "--n", "3", "--seed", "1", "--size", "64x48"]) == 0
    return out


@pytest.fixture(scope="module")
def seg_checkpoint_root(tmp_path_factory):
    """Random weights of a tiny seg model saved in the official layout."""
    from safetensors.torch import save_file

    from benchmarks.reproduce.tables import _adapt_config, checkpoint_path, config_name
    from sapiens2.models.builder import build_model, official_config

    root = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    model = build_model(_adapt_config(official_config(config_name("0.4b", "seg")), TINY, INPUT))
    path = checkpoint_path(root, "0.4b", "seg")
    path.parent.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return root, model.eval()


def test_reproduce_table1_prints_every_row(capsys):
    assert main(["reproduce", "table1"]) == 0
    out = capsys.readouterr().out
    for arch in ["sapiens2_0.1b", "sapiens2_0.4b", "sapiens2_0.8b", "sapiens2_1b", "sapiens2_1b_4k",
                 "sapiens2_5b"]:
        assert arch in out


def test_reproduce_lists_what_is_missing(tmp_path, capsys):
    args = ["--checkpoint-root", str(tmp_path), "--out", str(tmp_path / "o")]
    assert main(["reproduce", "table6", *args]) == 2
    out = capsys.readouterr().out
    for size in ["0.4b", "0.8b", "1b", "5b"]:
        assert str(tmp_path / "normal" / f"sapiens2_{size}_normal.safetensors") in out
    assert "--data-root" in out and "nothing to evaluate" in out
    assert main(["reproduce", "table2", "--out", str(tmp_path / "o")]) == 2
    assert "pretrain/sapiens2_0.4b_pretrain.safetensors" in capsys.readouterr().out


def test_reproduce_table4_end_to_end(synth_split, seg_checkpoint_root, tmp_path, capsys):
    root, model = seg_checkpoint_root
    out_dir = tmp_path / "repro"
    code = main(["reproduce", "table4", "--checkpoint-root", str(root), "--data-root", str(synth_split),
                 "--out", str(out_dir), "--sizes", "0.4b,0.8b", "--input-size", "64x48",
                 "--arch-settings", json.dumps(TINY), "--no-site"])
    assert code == 0
    out = capsys.readouterr().out
    assert str(root / "seg" / "sapiens2_0.8b_seg.safetensors") in out  # listed as missing
    assert "Table 4" in out and "79.50" in out  # the reported Sapiens2-0.4B mIoU is printed alongside
    rec = read_record(out_dir / "results" / "sapiens2_0.4b" / "seg.json")
    assert rec["protocol"]["kind"] == "eval" and rec["protocol"]["protocol_id"].startswith("eval-custom-")
    assert rec["model"]["checkpoint"]["sha256"] and rec["dataset"]["num_samples"] == 3
    # independent recomputation: normalise, run, resize logits to GT, argmax, dataset-level IoU
    from sapiens2.datasets.split import open_split

    ds = open_split(synth_split, "seg")
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    inter, union = np.zeros(29), np.zeros(29)
    with torch.no_grad():
        for i in range(len(ds)):
            s = ds[i]
            x = F.interpolate(torch.as_tensor(s["image"])[None], size=INPUT, mode="bilinear",
                              align_corners=False)
            logits = model((x * 255 - mean) / std)
            gt = torch.as_tensor(s["label"])
            pred = F.interpolate(logits, size=gt.shape, mode="bilinear", align_corners=False).argmax(1)[0]
            valid = gt != 255
            for c in range(29):
                p, g = (pred == c) & valid, (gt == c) & valid
                inter[c] += (p & g).sum().item()
                union[c] += (p | g).sum().item()
    with np.errstate(invalid="ignore", divide="ignore"):
        miou = np.nanmean(np.where(union > 0, inter / union, np.nan)) * 100
    assert rec["metrics"]["mIoU"] == pytest.approx(miou, abs=0.006)


@pytest.mark.slow
def test_run_quick_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--quick", "--out", str(out), "--backbones", "gt-oracle,pixels"]) == 0
    text = capsys.readouterr().out
    assert str(out / "site" / "index.html") in text
    recs = load_records([out / "results"], skip_foreign=True)
    probes = [r for r in recs if r["protocol"]["kind"] == "probe"]
    per_seed = [r for r in probes if len(r["seeds"]) == 1]
    assert {(r["model"]["name"], r["task"]) for r in per_seed} == {
        (m, t) for m in ("gt-oracle", "pixels") for t in ("pose", "seg", "normal", "pointmap", "albedo")}
    # the MediaPipe reference system joins when it is installed, under its own protocols
    from benchmarks.systems.mediapipe_system import require_mediapipe

    try:
        require_mediapipe()
        has_mediapipe = True
    except RuntimeError as e:
        print(f"mediapipe not installed, reference system not expected: {e}")
        has_mediapipe = False
    mp_recs = [r for r in recs if r["model"]["name"].startswith("mediapipe")]
    assert bool(mp_recs) == has_mediapipe
    assert all(r["protocol"]["kind"] == "eval" and r["protocol"]["protocol_id"] for r in mp_recs)
    from benchmarks.probe.protocol import quick_protocol

    ids = {r["model"]["name"]: r["protocol"]["protocol_id"] for r in probes}
    # the oracle (the ceiling row) is probed under the same protocol as the real backbones: one table
    assert ids["pixels"] == quick_protocol().protocol_id() and ids["gt-oracle"] == ids["pixels"]
    page = (out / "site" / "index.html").read_text(encoding="utf-8")
    for pid in (*ids.values(), "paper-table2"):
        assert f'id="t-seg-probe-{pid}"' in page
    assert all(math.isfinite(v) for r in per_seed for v in r["metrics"].values() if v is not None)
