"""Reports of hostile or large record sets: control and bidi characters never reach the HTML or Markdown
raw, and a leaderboard of many models keeps its figures capped (rows and pixels)."""

from __future__ import annotations

import re
import struct
import time

from leaderboard.build import build_site
from leaderboard.plots import MAX_BREAKDOWN_MODELS, MAX_FIGURE_ROWS, MAX_PIXELS
from sapiens2.records.results import make_record, write_record

PROBE = {"kind": "probe", "protocol_id": "p1"}
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _seg(model: str, miou: float, params=None):
    return make_record(model={"name": model, "params": params}, task="seg",
                       dataset={"name": "synth", "split": "test", "content_hash": None}, protocol=PROBE,
                       metrics={"summary": {"mIoU": miou, "mAcc": 60.0},
                                "per_class": {"IoU": [miou / 100] * 29}},
                       config={"p": "x"}, seeds=[0])


def test_control_and_bidi_characters_are_shown_not_written_raw(tmp_path):
    name = "rtl\u202etxt.exe\x00\x07\u2066x"
    write_record(tmp_path / "r" / "a.json", _seg(name, 40.0, 1_000_000))
    write_record(tmp_path / "r" / "b.json", _seg("plain", 30.0, 2_000_000))
    paths = build_site([tmp_path / "r"], tmp_path / "site", with_figures=False)
    for key in ("html", "markdown"):
        text = paths[key].read_text(encoding="utf-8")
        assert not UNSAFE.search(text), key
        assert "rtl[U+202E]txt.exe[U+0000][U+0007][U+2066]x" in text, key


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_large_leaderboard_keeps_its_figures_capped(tmp_path):
    n = 3 * MAX_FIGURE_ROWS
    for i in range(n):
        write_record(tmp_path / "r" / f"m{i:03d}.json", _seg(f"model_{i:03d}", 10.0 + 0.5 * i, 1_000_000 + i))
    t0 = time.perf_counter()
    paths = build_site([tmp_path / "r"], tmp_path / "site")
    took = time.perf_counter() - t0
    pngs = sorted((tmp_path / "site" / "figures").glob("*.png"))
    assert pngs
    for p in pngs:
        w, h = _png_size(p.read_bytes())
        assert w * h <= MAX_PIXELS, (p.name, w, h)
    html = paths["html"].read_text(encoding="utf-8")
    assert f"top {MAX_FIGURE_ROWS} of {n} by mIoU" in html
    assert f"top {MAX_BREAKDOWN_MODELS} of {n} models by their mean" in html
    assert html.count("model_000") >= 1 and "model_119" in html  # the tables still list every row
    print(f"{n} records with figures: {took:.1f} s, {len(html) / 1e6:.2f} MB page")
