"""Real browser test: headless Chromium (Selenium + Debian's chromedriver) opens the leaderboard page.

At 1400 x 900 it checks that the summary table is above the fold, that the page is never wider
than the window, that the model column stays put when a wide table is scrolled right (sticky),
that the filter box hides rows, that sorting works and keeps the oracle's ceiling row on top, and
that a hostile model name stays text. Screenshots go to the test's tmp folder (and to
``$SAPIENS2_SCREENSHOT_DIR`` when set). Marked ``chromium``: skips, with the reason printed, only
when Chromium or chromedriver is missing (never under CI); ``scripts/install_chromium.sh`` installs both.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest
from browser_driver import Browser

from leaderboard.build import build_site
from leaderboard.results import make_record, write_record

HOSTILE = "<script>window.__pwned=1</script><b>bold</b>"
# (name, weights, backbone, params, quality)
MODELS = [("gt-oracle", "none", "GroundTruthOracle", None, 0.95),
          ("sapiens2_0.1b", "random(seed=0)", "sapiens2_0.1b", 114_000_000, 0.41),
          ("dinov2_small", "random(seed=0)", "dinov2_small", 22_000_000, 0.47),
          ("pixels", "none", "PixelPatches", None, 0.12),
          (HOSTILE, "random(seed=0)", "x", 5_000_000, 0.30)]
pytestmark = pytest.mark.chromium
TABLE = "t-pose-probe-p1"
W, H = 1400, 900


def _metrics(task: str, q: float) -> dict:
    if task == "pose":
        return {"wholebody": {"AP": q, "AR": q + 0.02, "AP .5": q + 0.1, "AP .75": q - 0.05},
                **{p: {"AP": q - 0.01 * i, "AR": q} for i, p in
                   enumerate(["body", "foot", "face", "left_hand", "right_hand"])}}
    if task == "seg":
        return {"summary": {"mIoU": 100 * q, "mAcc": 100 * q + 5, "aAcc": 90.0, "mDice": 100 * q,
                            "mFscore": 90.0},
                "per_class": {"IoU": [q if c % 7 else None for c in range(29)]}}
    return {"normal": {"normal_mae": 40 * (1 - q), "normal_median_deg": 30 * (1 - q)},
            "pointmap": {"l2_mean": 0.5 * (1 - q), "rmse": 0.7 * (1 - q)},
            "albedo": {"mae": 0.2 * (1 - q), "psnr": 30 * q}}[task]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    for i, (model, weights, backbone, params, q) in enumerate(MODELS):
        for task in ("pose", "seg", "normal", "pointmap", "albedo"):
            metrics = _metrics(task, q)
            head = {"pose": "AP", "seg": "mIoU", "normal": "normal_mae", "pointmap": "l2_mean",
                    "albedo": "mae"}[task]
            value = metrics.get(head, metrics.get("summary", {}).get(head, q))
            intervals = {"level": 0.95, "method": "bootstrap", "resamples": 1000, "seed": 0, "n": 40,
                         "bounds": {head: [0.9 * value, 1.1 * value]}}
            rec = make_record(
                model={"name": model, "params": params, "weights": weights, "backbone": backbone},
                task=task, dataset={"name": "synth", "split": "test", "content_hash": None,
                                    "num_samples": 40},
                protocol={"kind": "probe", "protocol_id": "p1"}, metrics=metrics,
                config={"protocol": {"v": 1}}, seeds=[0], intervals=intervals if task != "pose" else None)
            write_record(root / "results" / f"{task}-{i}.json", rec)
    return build_site([root / "results"], root / "site", include_paper=True,
                      protocol_names={"p1": "probe v1 (test)"})["html"]


@pytest.fixture(scope="module")
def browser():
    with Browser(width=W, height=H) as b:
        yield b


@pytest.fixture()
def page(browser, site):
    browser.open(site.as_uri())
    return browser


def _column(b, table: str, col: int) -> list[str]:
    return b.evaluate(f"Array.from(document.querySelectorAll('#{table} tbody.ranked tr'))"
                      f".map(r => r.cells[{col}].firstChild.textContent)")


def _header_index(b, table: str, label: str) -> int:
    return b.evaluate(f"Array.from(document.querySelectorAll('#{table} thead th'))"
                      ".map(th => th.firstChild.textContent)").index(label)


def test_summary_above_the_fold_and_page_fits_the_window(page, tmp_path):
    assert page.evaluate("[window.innerWidth, window.innerHeight]") == [W, H]
    assert page.evaluate("document.documentElement.scrollWidth") <= W, "the page is wider than the window"
    summary = page.rect("#summary table")
    assert 0 <= summary["top"] and summary["bottom"] <= H, f"summary table not above the fold: {summary}"
    first_table = page.evaluate("document.querySelector('table').id")
    assert first_table == "summary"
    models = page.evaluate("Array.from(document.querySelectorAll('#summary tbody tr'))"
                           ".map(r => r.getAttribute('data-model'))")
    expected = [m + (" (random init)" if w.startswith("random") else "") for m, w, *_ in MODELS]
    assert sorted(models) == sorted(expected)
    assert page.evaluate("document.getElementById('no-pretrained') !== null")
    assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
    assert page.evaluate("Array.from(document.images).every(i => i.src.startsWith('data:image/png'))")
    _check_png(page.screenshot(tmp_path / "1-top.png"), W, H)


def test_model_column_stays_visible_when_a_table_scrolls(page, tmp_path):
    scroll = f"#{TABLE}-scroll"
    page.click(f"{scroll} thead th:nth-child(2)")  # bring it into view with a real click (sorts by source)
    assert page.evaluate(f"document.querySelector('{scroll}').scrollWidth > "
                         f"document.querySelector('{scroll}').clientWidth"), "table too narrow to test"
    before = page.rect(f"#{TABLE} tbody.ranked tr td:nth-child(3)")
    page.evaluate(f"document.querySelector('{scroll}').scrollLeft = 500")
    box = page.rect(scroll)
    for cell in (f"#{TABLE} thead th:first-child", f"#{TABLE} tbody.ranked tr td:first-child",
                 f"#{TABLE} tbody.ceiling tr td:first-child"):
        r = page.rect(cell)
        assert abs(r["left"] - box["left"]) <= 1.5, f"{cell} left the container's left edge: {r} vs {box}"
    after = page.rect(f"#{TABLE} tbody.ranked tr td:nth-child(3)")
    assert after["left"] < before["left"] - 400, "the other columns did not scroll"
    # the model cell covers what scrolls under it
    hit = page.evaluate(f"document.elementFromPoint({box['left'] + 5}, "
                        f"{page.rect(f'#{TABLE} tbody.ranked tr td:first-child')['top'] + 5}).closest('td')"
                        ".cellIndex")
    assert hit == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= W
    _check_png(page.screenshot(tmp_path / "2-sticky.png"), W, H)


def test_filter_hides_rows_in_every_table(page, tmp_path):
    total = page.evaluate("document.querySelectorAll('tr[data-model]').length")
    page.type("#model-filter", "SAPIENS2")
    shown = page.evaluate("Array.from(document.querySelectorAll('tr[data-model]'))"
                          ".filter(r => r.offsetParent !== null).map(r => r.getAttribute('data-model'))")
    assert shown and all("sapiens2" in m.lower() for m in shown), shown
    assert "sapiens2_0.1b (random init)" in shown and len(shown) < total
    assert page.evaluate("document.querySelectorAll('#summary tbody tr:not([hidden])').length") == 1
    assert "rows match" in page.evaluate("document.getElementById('filter-count').textContent")
    page.evaluate("window.scrollTo(0, 0)")
    _check_png(page.screenshot(tmp_path / "3-filtered.png"), W, H)
    page.type("#model-filter", "")
    assert page.evaluate("document.querySelectorAll('tr[data-model][hidden]').length") == 0


def test_sorting_keeps_the_ceiling_row_and_never_bolds_it(page):
    ap = _header_index(page, TABLE, "AP %")
    model = _header_index(page, TABLE, "model")
    assert model == 0
    page.click(f"#{TABLE} thead th:nth-child({ap + 1})")  # higher is better: first click sorts descending
    measured = sorted((m for m in MODELS if m[0] != "gt-oracle"), key=lambda m: -m[4])
    names = _column(page, TABLE, model)
    assert [n.replace(" (random init)", "") for n in names] == [m[0] for m in measured]
    assert page.evaluate(f"document.querySelectorAll('#{TABLE} thead th')[{ap}].getAttribute('aria-sort')") \
        == "descending"
    page.click(f"#{TABLE} thead th:nth-child({ap + 1})")
    assert _column(page, TABLE, model) == names[::-1]
    assert page.evaluate(f"document.querySelector('#{TABLE} tbody').className") == "ceiling"
    assert page.evaluate(f"document.querySelectorAll('#{TABLE} tbody.ceiling td.best').length") == 0
    assert page.evaluate(f"document.querySelectorAll('#{TABLE} tbody.ranked td.best').length") > 0


def test_hostile_model_name_stays_text(page):
    assert page.evaluate("window.__pwned === undefined")
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.querySelectorAll('table b').length") == 0
    names = page.evaluate("Array.from(document.querySelectorAll('#summary tbody tr td:first-child'))"
                          ".map(td => td.textContent)")
    assert HOSTILE + " (random init)" in names


def test_sort_from_url_fragment_and_full_page(browser, site, tmp_path):
    browser.open(site.as_uri() + "#sort=t-seg-probe-p1:0:asc")
    names = _column(browser, "t-seg-probe-p1", 0)
    assert names == sorted(names) and len(names) == len(MODELS) - 1
    _check_png(browser.screenshot(tmp_path / "4-full.png", full_page=True), W, 3000, exact=False)


def _check_png(path, width, height, exact=True):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    if exact:
        assert (w, h) == (width, height), f"{path}: {w}x{h}"
    else:
        assert w >= width - 40 and h >= height, f"{path}: {w}x{h}"
    from PIL import Image

    with Image.open(path) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 50, f"{path}: nearly uniform image ({len(colours)} colours)"
    keep = os.environ.get("SAPIENS2_SCREENSHOT_DIR")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(path, keep)
    print(f"screenshot: {path} ({w}x{h}, {len(data)} bytes)")
