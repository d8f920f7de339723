"""Model card: exact params and meta-device FLOP counts, checked against closed-form counts."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from sapiens2.models.flops import count_flops

TINY = {"embed_dims": 64, "num_layers": 18, "num_heads": 4, "feedforward_channels": 128}


def _tiny(fast: bool, use_tokenizer: bool = False):
    from sapiens2.models.builder import build_model

    arch = dict(TINY, num_tokenizer_layers=2) if use_tokenizer else TINY
    size = (512, 384) if use_tokenizer else (128, 96)
    return build_model({"type": "Sapiens2", "arch": arch, "img_size": size, "fast_attention": fast,
                        "use_tokenizer": use_tokenizer}, device="meta").eval()


def _closed_form(model, h: int, w: int) -> tuple[int, int, int]:
    """(linear MACs, conv MACs, attention MACs) from the weight shapes, for a non-tokenizer Sapiens2."""
    patches = (h // 16) * (w // 16)
    tokens = patches + 1 + 8
    linear = sum(m.weight.numel() for m in model.blocks.modules() if isinstance(m, torch.nn.Linear)) * tokens
    conv = model.patch_embed.projection.weight.numel() * patches
    attention = 2 * tokens * tokens * model.embed_dims * model.num_layers  # QK^T and AV per block
    return linear, conv, attention


@pytest.mark.parametrize("fast", [True, False])
def test_flop_counter_matches_closed_form(fast):
    model = _tiny(fast)
    got = count_flops(model, (1, 3, 128, 96))
    linear, conv, attention = _closed_form(model, 128, 96)
    assert got.linear == 2 * linear
    assert got.conv == 2 * conv
    assert got.attention == 2 * attention
    assert got.card_flops == linear + conv


def test_flops_scale_with_batch_and_resolution():
    model = _tiny(True)
    one = count_flops(model, (1, 3, 128, 96))
    two = count_flops(model, (2, 3, 128, 96))
    assert two.total == 2 * one.total
    big = count_flops(model, (1, 3, 256, 192))
    linear, conv, attention = _closed_form(model, 256, 192)
    assert big.card_flops == linear + conv and big.attention == 2 * attention


def test_tokenizer_flops_counted():
    plain, tok = _tiny(True), _tiny(True, use_tokenizer=True)
    # 4x4 windows: the global blocks see 16x fewer patch tokens, the tokenizer adds windowed work.
    a = count_flops(plain, (1, 3, 512, 384)).card_flops
    b = count_flops(tok, (1, 3, 512, 384)).card_flops
    assert 0 < b < a


def test_model_card_cli(tmp_path, capsys):
    from benchmarks.cli.main import main
    from sapiens2.reference import official_archs

    out_json, out_csv = tmp_path / "card.json", tmp_path / "card.csv"
    archs = ["sapiens2_0.1b", "sapiens2_1b_4k"]
    flags = [f"--arch={a}" for a in archs]
    code = main(["model-card", "--json", str(out_json), "--csv", str(out_csv)] + flags)
    assert code == 0
    printed = capsys.readouterr().out
    assert "sapiens2_1b_4k" in printed and "convention" in printed
    rows = json.loads(out_json.read_text())["rows"]
    table = official_archs()["archs"]
    assert [r["arch"] for r in rows] == archs
    for row in rows:
        assert row["params"] == table[row["arch"]]["num_params"]
        assert row["params_paper_b"] == table[row["arch"]]["params_b_card"]
        assert row["flops_paper_t"] == table[row["arch"]]["tflops_card"]
        assert row["flops"] > 0 and row["flops_total_2x_macs"] > 2 * row["flops"]
    assert rows[0]["img_size"] == "1024x768" and rows[1]["img_size"] == "4096x3072"
    # The card convention lands within 5% of the printed 0.342 T for 0.1B.
    assert abs(rows[0]["flops_diff_pct"]) < 5
    # The output explains the difference with the measured numbers (1B-4K has no printed FLOPs).
    assert "FLOPs note" in printed
    assert f"sapiens2_0.1b: {rows[0]['flops_diff_pct']:+.2f}% (card convention)" in printed
    assert "sapiens2_1b_4k:" not in printed.split("FLOPs note")[1]
    with open(out_csv, newline="") as f:
        assert [r["arch"] for r in csv.DictReader(f)] == archs


def test_flops_note_states_every_difference():
    from benchmarks.reproduce.model_card import flops_note

    def row(arch, flops, paper, diff, attention):
        return {"arch": arch, "flops": flops, "flops_paper_t": paper, "flops_diff_pct": diff,
                "macs_attention": attention}

    rows = [row("a", 1.02e12, 1.0, 2.0, 0), row("b", 0.95e12, 1.0, -5.0, 1e11), row("c", 2e12, None, None, 0)]
    note = flops_note(rows)
    assert "a: +2.00% (card convention), +2.00% with the attention" in note
    assert "b: -5.00% (card convention), +5.00% with the attention" in note
    assert "c:" not in note and "from -5.00% to +2.00%" in note and "size and sign" in note
    assert "size and sign" not in flops_note(rows[1:])


def test_model_card_unknown_arch(capsys):
    from benchmarks.cli.main import main

    assert main(["model-card", "--arch", "sapiens2_9b"]) == 1
    err = capsys.readouterr().err
    assert "sapiens2_9b" in err and "sapiens2_0.4b" in err
