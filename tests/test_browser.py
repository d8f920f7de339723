"""Real browser test: headless Chromium opens the leaderboard page, sorts columns, takes a screenshot.

Skips (with the reason) when no Chromium is installed; ``scripts/install_chromium.sh`` installs
Debian's package in CI. Set ``SAPIENS2_SCREENSHOT_DIR`` to keep the screenshots.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from browser_driver import HeadlessChromium, find_chromium

from leaderboard.build import build_site
from leaderboard.results import make_record, write_record

MODELS = [("sapiens2_0.1b", 114_000_000, 0.41), ("sapiens_0.3b", 336_000_000, 0.35),
          ("pixel <b>patches</b>", 0, 0.12), ("dinov2_small", 22_000_000, 0.47)]
TABLE = "t-pose-probe-p1"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    for i, (model, params, ap) in enumerate(MODELS):
        for task, metrics in [("pose", {"wholebody": {"AP": ap, "AR": ap + 0.05}, "body": {"AP": ap + 0.2},
                                        "face": {"AP": ap - 0.1}}),
                              ("seg", {"mIoU": 100 * ap, "mAcc": 60.0 - i})]:
            rec = make_record(model={"name": model, "params": params}, task=task,
                              dataset={"name": "synth", "split": "test", "content_hash": None},
                              protocol={"kind": "probe", "protocol_id": "p1"}, metrics=metrics,
                              config={"i": i}, seeds=[0])
            write_record(root / "results" / f"{task}-{i}.json", rec)
    paths = build_site([root / "results"], root / "site", include_paper=True)
    return paths["html"]


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        msg = "no Chromium binary (install Debian's 'chromium' package: scripts/install_chromium.sh)"
        print(f"SKIP: {msg}")
        pytest.skip(msg)
    with HeadlessChromium(width=1280, height=900) as b:
        yield b


def _column(browser, table: str, col: int) -> list[str]:
    return browser.evaluate(
        f"Array.from(document.querySelectorAll('#{table} tbody tr')).map(r => r.cells[{col}].textContent)")


def _header_index(browser, table: str, label: str) -> int:
    labels = browser.evaluate(
        f"Array.from(document.querySelectorAll('#{table} thead th')).map(th => th.textContent)")
    return labels.index(label)


def test_click_sorts_column_and_screenshot(browser, site, tmp_path):
    browser.open(site.as_uri())
    assert browser.evaluate("document.title") == "sapiens2-bench leaderboard"
    ap_col = _header_index(browser, TABLE, "AP %")
    model_col = _header_index(browser, TABLE, "model")
    # a real click on the header: AP is higher-is-better, so the first click sorts descending
    browser.evaluate(f"document.querySelectorAll('#{TABLE} thead th')[{ap_col}].click()")
    by_ap = [m for m, _, _ in sorted(MODELS, key=lambda m: -m[2])]
    assert _column(browser, TABLE, model_col) == by_ap
    values = [float(v) for v in _column(browser, TABLE, ap_col)]
    assert values == sorted(values, reverse=True)
    assert browser.evaluate(f"document.querySelectorAll('#{TABLE} thead th')[{ap_col}]"
                            ".getAttribute('aria-sort')") == "descending"
    browser.evaluate(f"document.querySelectorAll('#{TABLE} thead th')[{ap_col}].click()")
    assert _column(browser, TABLE, model_col) == by_ap[::-1]
    # text column: alphabetical; the escaped user string shows as text, not as markup
    browser.evaluate(f"document.querySelectorAll('#{TABLE} thead th')[{model_col}].click()")
    names = _column(browser, TABLE, model_col)
    assert sorted(names, key=str.lower, reverse=True) == names
    assert "pixel <b>patches</b>" in names
    assert browser.evaluate("document.querySelectorAll('b').length") == 0
    # images are inline and decoded; nothing was fetched from the network
    assert browser.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert browser.evaluate("Array.from(document.images).every(i => i.src.startsWith('data:image/png'))")
    browser.evaluate(f"document.getElementById('s-{TABLE}').scrollIntoView()")
    shot = browser.screenshot(tmp_path / "leaderboard.png")
    _check_png(shot, 1280, 900)


def test_sort_from_url_fragment(browser, site, tmp_path):
    browser.open(site.as_uri() + "#sort=t-seg-probe-p1:6:asc")
    macc_col = _header_index(browser, "t-seg-probe-p1", "mAcc %")
    assert macc_col == 6
    values = [float(v) for v in _column(browser, "t-seg-probe-p1", macc_col)]
    assert values == sorted(values) and len(values) == len(MODELS)
    shot = browser.screenshot(tmp_path / "leaderboard_full.png", full_page=True)
    _check_png(shot, 1200, 2000, exact=False)


def _check_png(path, width, height, exact=True):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    if exact:
        assert (w, h) == (width, height), f"{path}: {w}x{h}"
    else:
        assert w >= width and h >= height, f"{path}: {w}x{h}"
    from PIL import Image

    with Image.open(path) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50, f"{path}: nearly uniform image ({len(colours)} colours)"
    keep = os.environ.get("SAPIENS2_SCREENSHOT_DIR")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(path, keep)
    print(f"screenshot: {path} ({w}x{h}, {len(data)} bytes)")
