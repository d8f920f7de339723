"""``reproduce`` (table1, task tables on self-made checkpoints + synthetic data) and ``run --quick``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from benchmarks.cli.main import main
from leaderboard.report_md import fmt
from sapiens2.records.results import load_records, make_record, read_record

TINY = {"sapiens2_0.4b": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}}
INPUT = (64, 48)
# The 1B-4K backbone keeps its 4x4-window tokenizer: input sides are multiples of 64 (patch 16 x window 4).
TINY_4K = {"sapiens2_1b_4k": {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64,
                              "num_tokenizer_layers": 1}}
INPUT_4K = (128, 64)


@pytest.fixture(scope="module")
def synth_split(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "split"
    assert main(["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "3", "--seed", "1",
                 "--size", "64x48"]) == 0
    return out


def _save_random_model(root, size: str, settings: dict, input_size):
    """Random weights of a tiny ``size`` seg model saved in the official layout; returns the model."""
    from safetensors.torch import save_file

    from benchmarks.reproduce.tables import _adapt_config, checkpoint_path, size_key, task_config
    from sapiens2.models.builder import build_model

    torch.manual_seed(0)
    model = build_model(_adapt_config(task_config(size, "seg"), settings, input_size,
                                      arch_key=f"sapiens2_{size_key(size)}"))
    path = checkpoint_path(root, size, "seg")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model.eval()


@pytest.fixture(scope="module")
def seg_checkpoint_root(tmp_path_factory):
    """Random weights of a tiny seg model saved in the official layout."""
    root = tmp_path_factory.mktemp("ckpt")
    return root, _save_random_model(root, "0.4b", TINY, INPUT)


def _independent_miou(model, split, input_size) -> float:
    """Normalise, run, resize logits to GT, argmax, dataset-level IoU: computed here, not by the evaluator."""
    from sapiens2.datasets.split import open_split

    ds = open_split(split, "seg")
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    inter, union = np.zeros(29), np.zeros(29)
    with torch.no_grad():
        for i in range(len(ds)):
            s = ds[i]
            x = F.interpolate(torch.as_tensor(s["image"])[None], size=input_size, mode="bilinear",
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
        return float(np.nanmean(np.where(union > 0, inter / union, np.nan)) * 100)


def test_reproduce_table1_prints_every_row(tmp_path, capsys):
    assert main(["reproduce", "table1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for arch in ["sapiens2_0.1b", "sapiens2_0.4b", "sapiens2_0.8b", "sapiens2_1b", "sapiens2_1b_4k",
                 "sapiens2_5b"]:
        assert arch in out
    assert "FLOPs note" in out and "in-house" not in out  # Table 1 needs no test data


def test_reproduce_table1_out_is_written_and_reused(tmp_path, monkeypatch, capsys):
    from benchmarks.reproduce import model_card

    real, calls = model_card.compute_rows, []

    def counting(archs=None):  # the 0.1B row only: this test is about reuse, not the numbers
        calls.append(archs)
        return real(["sapiens2_0.1b"])

    monkeypatch.setattr(model_card, "compute_rows", counting)
    card = tmp_path / "table1" / "model_card.json"
    assert main(["reproduce", "table1", "--out", str(tmp_path)]) == 0
    assert "computing the model card (no stored card)" in capsys.readouterr().out and len(calls) == 1
    stored = json.loads(card.read_text())
    assert [r["arch"] for r in stored["rows"]] == ["sapiens2_0.1b"] and stored["inputs"]["sha256"]
    assert not list(card.parent.glob(".*.tmp"))  # written atomically, no temporary left
    assert main(["reproduce", "table1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"reused {card}" in out and "sapiens2_0.1b" in out and len(calls) == 1
    stored["inputs"]["files"]["sapiens2/models/flops.py"] = "0" * 64
    stored["inputs"]["sha256"] = "changed"
    card.write_text(json.dumps(stored))
    assert main(["reproduce", "table1", "--out", str(tmp_path)]) == 0
    assert "inputs changed: sapiens2/models/flops.py" in capsys.readouterr().out and len(calls) == 2
    card.write_text("{not json")
    assert main(["reproduce", "table1", "--out", str(tmp_path)]) == 0
    assert "unreadable" in capsys.readouterr().out and len(calls) == 3
    assert main(["reproduce", "table1", "--out", str(tmp_path), "--force"]) == 0
    assert "(--force)" in capsys.readouterr().out and len(calls) == 4


def test_reproduce_lists_what_is_missing(tmp_path, capsys):
    args = ["--checkpoint-root", str(tmp_path), "--out", str(tmp_path / "o")]
    assert main(["reproduce", "table6", *args]) == 2
    out = capsys.readouterr().out
    for size in ["0.4b", "0.8b", "1b", "5b"]:
        assert str(tmp_path / "normal" / f"sapiens2_{size}_normal.safetensors") in out
    assert "--data-root" in out and "nothing to evaluate" in out
    assert "10K synthetic whole-body renders with 4K ground truth (in-house, not public)" in out
    assert "huggingface.co/facebook/sapiens2-normal-0.4b" in out  # where each missing file comes from
    assert main(["reproduce", "table2", "--out", str(tmp_path / "o")]) == 2
    out = capsys.readouterr().out
    assert "pretrain/sapiens2_0.4b_pretrain.safetensors" in out and "in-house, not public" in out
    assert main(["reproduce", "table7", *args]) == 2
    assert "no public repository is known" in capsys.readouterr().out  # albedo: placed by hand


def test_reproduce_1b_4k_only_where_the_paper_has_it(tmp_path, capsys):
    assert main(["reproduce", "table3", "--sizes", "1b-4k", "--out", str(tmp_path)]) == 1
    assert "Tables 4 and 6 only" in capsys.readouterr().err
    assert main(["reproduce", "table6", "--sizes", "1b-4k", "--checkpoint-root", str(tmp_path)]) == 2
    assert str(tmp_path / "normal" / "sapiens2_1b_4k_normal.safetensors") in capsys.readouterr().out
    assert main(["reproduce", "table4", "--checkpoint-root", str(tmp_path)]) == 2  # default: every row
    out = capsys.readouterr().out
    path_4k = tmp_path / "seg" / "sapiens2_1b_4k_seg.safetensors"
    assert f"{path_4k} (official Sapiens2-1B-4K seg model; no public repository is known" in out
    assert str(tmp_path / "seg" / "sapiens2_5b_seg.safetensors") in out


def test_reproduce_table4_runs_the_1b_4k_row(synth_split, tmp_path, capsys):
    root = tmp_path / "ckpt"
    model = _save_random_model(root, "1b-4k", TINY_4K, INPUT_4K)
    assert model.backbone.tokenizer is not None  # the 4K hierarchical backbone, not the plain 1B one
    out_dir = tmp_path / "repro"
    code = main(["reproduce", "table4", "--checkpoint-root", str(root), "--data-root", str(synth_split),
                 "--out", str(out_dir), "--sizes", "1b-4k", "--input-size", "128x64",
                 "--arch-settings", json.dumps(TINY_4K), "--no-site"])
    assert code == 0
    out = capsys.readouterr().out
    assert "derived; no published 1B-4K config" in out
    assert "sapiens2_1b_4k" in out and "81.90" in out  # the reported Sapiens2-1B-4K mIoU alongside
    rec = read_record(out_dir / "results" / "sapiens2_1b_4k" / "seg.json")
    assert rec["model"]["name"] == "sapiens2_1b_4k" and rec["config"]["input_size"] == [128, 64]
    assert rec["protocol"]["protocol_id"].startswith("eval-custom-")
    assert rec["model"]["params"] == sum(p.numel() for p in model.parameters())
    assert rec["metrics"]["mIoU"] == pytest.approx(_independent_miou(model, synth_split, INPUT_4K), abs=0.006)


def test_a_measurement_on_data_gets_its_own_protocol_and_is_never_ranked_in_a_paper_table(tmp_path):
    """Official models and protocol on user data (the paper's test sets are in-house): own protocol id per
    data and N, labelled with what it was measured on; in the report, a table apart from the paper's rows."""
    from benchmarks.reproduce.tables import protocol_for
    from leaderboard.paper import load_paper_results
    from leaderboard.tables import combine, group_tables, records_to_frame
    from sapiens2.tasks import get_task

    data = {"root": "my/data", "content_hash": "c0ffee", "n": 10, "total": 10}
    full = protocol_for((1024, 768), None, "0.4b", data)
    assert full["protocol_id"].startswith("eval-data-")
    assert full["description"] == "official models and protocol, measured on 10 images of my/data"
    fewer = protocol_for((1024, 768), None, "0.4b", {**data, "n": 2})
    assert fewer["protocol_id"] != full["protocol_id"] and "(the first 2 of 10)" in fewer["description"]
    other = protocol_for((1024, 768), None, "0.4b", {**data, "content_hash": "beef"})
    assert other["protocol_id"] != full["protocol_id"]
    head = get_task("seg").headline
    rec = make_record(model={"name": "sapiens2_0.4b", "params": 1, "weights": "checkpoint"}, task="seg",
                      dataset={"name": "mine", "split": "test", "content_hash": "c0ffee", "num_samples": 2},
                      protocol=fewer, metrics={head: 99.0}, config={}, seeds=[])
    tables = group_tables(combine(records_to_frame([rec]), load_paper_results()))
    ours = [t for t in tables if (t.rows["source"] == "reproduced").any()]
    assert len(ours) == 1 and not (ours[0].rows["source"] == "reported").any() and not ours[0].delta_columns
    assert all(not (t.rows["source"] == "reproduced").any() for t in tables if t.protocol_key == "eval")


def test_official_input_and_protocol_of_the_4k_row():
    from benchmarks.reproduce.tables import protocol_for

    assert "protocol_id" not in protocol_for((4096, 3072), None, "1b-4k")
    assert "protocol_id" in protocol_for((1024, 768), None, "1b-4k")
    assert "protocol_id" not in protocol_for((1024, 768), None, "0.4b")


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
    # records name the data by its public path (no absolute local path is published)
    assert f"measured on 3 images of {synth_split.name}" in rec["protocol"]["description"]
    assert str(synth_split) not in rec["protocol"]["description"]
    # measured on other data: no delta to the paper's 79.50 is printed, and the column says so
    line = next(ln for ln in out.splitlines() if ln.startswith("sapiens2_0.4b") and "mIoU" in ln)
    assert "79.50" in line and line.split()[-3] == fmt(None, signed=True), line
    assert " measured " in out and "reproduced" not in out.split("source")[0].splitlines()[-1]
    assert rec["model"]["checkpoint"]["sha256"] and rec["dataset"]["num_samples"] == 3
    assert rec["metrics"]["mIoU"] == pytest.approx(_independent_miou(model, synth_split, INPUT), abs=0.006)
    # the record says what its metrics mean: mIoU heads seg, in percent, higher is better
    assert rec["metric_decls"]["mIoU"]["headline"] and rec["metric_decls"]["mIoU"]["higher_is_better"]


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

    ids = {(r["model"]["name"], r["task"]): r["protocol"]["protocol_id"] for r in probes}
    # the oracle (the ceiling row) is probed under the same protocol as the real backbones: one table
    # per task, under that task's id
    page = (out / "site" / "index.html").read_text(encoding="utf-8")
    for task, pid in quick_protocol().protocol_ids().items():
        assert ids[("pixels", task)] == pid and ids[("gt-oracle", task)] == pid
        assert f'id="t-{task}-probe-{pid}"' in page
    assert 'id="t-seg-probe-paper-table2"' in page
    assert all(math.isfinite(v) for r in per_seed for v in r["metrics"].values() if v is not None)
