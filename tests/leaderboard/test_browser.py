"""Real browser test: headless Chromium (Selenium + Debian's chromedriver) opens the leaderboard page.

At 1400 x 900 it checks that the summary table is above the fold, that the page is never wider
than the window, that the model column stays put when a wide table is scrolled right (sticky),
that the filter box hides rows, that sorting works and keeps the oracle's ceiling row on top, and
that a hostile model name stays text. At 1400 x 900 and on a 390 x 844 phone screen it checks one
summary table per protocol (a reference system's 2-class person/background mIoU never in the
probe's column; the floor and ceiling rows apart, never bolded; the note on a random-init row
ranking first), the paired comparisons' verdict column in view, no word broken mid-word, and (on
the phone) a number on the first screen. Screenshots go to the test's tmp folder (and to
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
from sapiens2.records.results import make_record, write_record

HOSTILE = "<script>window.__pwned=1</script><b>bold</b>"
# (name, weights, backbone, params, quality)
MODELS = [("gt-oracle", "none", "GroundTruthOracle", None, 0.95),
          ("sapiens2_0.1b", "random(seed=0)", "sapiens2_0.1b", 114_000_000, 0.41),
          ("dinov2_small", "random(seed=0)", "dinov2_small", 22_000_000, 0.47),
          ("floor", "none", "FeatureFreeFloor", None, 0.10),
          ("pixels", "none", "PixelPatches", None, 0.12),
          (HOSTILE, "random(seed=0)", "x", 5_000_000, 0.30)]
pytestmark = [pytest.mark.chromium, pytest.mark.slow]  # slow: one browser for the module
TABLE = "t-pose-probe-p1"
SUMMARY_ROWS = "#summary table.lb:not([id$=-verdicts]) tbody tr"  # the summaries' rows, not their verdicts'
W, H = 1400, 900
PHONE = (390, 844)
REFERENCE = ("mediapipe-selfie-segmentation (0.10.21)", 85.0)  # a 2-class person/background mIoU
# paired comparisons as the probe writes them, with a long verdict (the column that got cut off)
# (names as long as the main job's, which made the table wider than 1400 px)
PAIR = ("sapiens2_cpu_small_mae", "sapiens2_cpu_small_mae-random")
COMPARISONS = [{"task": t, "a": PAIR[0], "b": PAIR[1], "n": 96, "level": 0.95,
                "verdict": f"{PAIR[0]} better beyond the 95% interval",
                "display": {"metric": f"{t} headline, % of range (lower is better)", "value_a": "14.38",
                            "value_b": "15.02", "difference": "-0.634 [-0.774, -0.484]"}}
               for t in ("pose", "seg", "normal", "pointmap", "albedo")]
# the main job's pairs, folded into each summary's verdict table: every backbone against the floor and
# the random-init twin (here sapiens2_0.1b's twin is the random dinov2_small row, for the test's sake)
VERDICTS = [{"task": t, "a": a, "b": b, "n": 40, "level": 0.95, "protocol_id": "p1", "winner": w,
             "verdict": f"{dict(a=a, b=b)[w]} better beyond the 95% interval" if w else "within the interval",
             "difference": d, "low": d, "high": d if w is None else d + 1.0,
             "display": {"metric": f"{t} headline", "value_a": "1", "value_b": "1", "difference": f"{d}"}}
            for t in ("seg", "normal", "pointmap", "albedo")
            for a, b, w, d in (("sapiens2_0.1b", "floor", "a", 0.5),
                               ("sapiens2_0.1b", "dinov2_small", "b", -6.0), ("pixels", "floor", None, 0.0))]


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
                         "bounds": {head: [0.99 * value, 1.01 * value]}}
            rec = make_record(
                model={"name": model, "params": params, "weights": weights, "backbone": backbone},
                task=task, dataset={"name": "synth", "split": "test", "content_hash": None,
                                    "num_samples": 40},
                protocol={"kind": "probe", "protocol_id": "p1"}, metrics=metrics,
                config={"protocol": {"v": 1}}, seeds=[0], intervals=intervals if task != "pose" else None)
            write_record(root / "results" / f"{task}-{i}.json", rec)
    name, miou = REFERENCE
    rec = make_record(
        model={"name": name, "params": None, "weights": "mediapipe selfie_segmenter.tflite"},
        task="seg", dataset={"name": "synth", "split": "test", "content_hash": None, "num_samples": 40},
        protocol={"kind": "eval", "protocol_id": "person-vs-background-v1",
                  "description": "person vs background (2 classes); not comparable with 29-class mIoU"},
        metrics={"summary": {"mIoU": miou, "mAcc": 90.0, "aAcc": 93.0}},
        config={"system": "mediapipe", "task": "seg"}, seeds=[0])
    write_record(root / "results" / "mediapipe-seg.json", rec)
    return build_site([root / "results"], root / "site", include_paper=True,
                      protocol_names={"p1": "probe v1 (test)"}, comparisons=COMPARISONS + VERDICTS)["html"]


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
    assert first_table.startswith("summary-")
    models = page.evaluate(f"Array.from(document.querySelectorAll('{SUMMARY_ROWS}'))"
                           ".map(r => r.getAttribute('data-model'))")
    expected = [m + (" (random init)" if w.startswith("random") else "") for m, w, *_ in MODELS]
    assert sorted(models) == sorted(expected + [REFERENCE[0]])
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
    assert page.evaluate(f"document.querySelectorAll('{SUMMARY_ROWS}:not([hidden])').length") == 1
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
    measured = sorted((m for m in MODELS if m[0] not in ("gt-oracle", "floor")), key=lambda m: -m[4])
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
    names = page.evaluate(f"Array.from(document.querySelectorAll('{SUMMARY_ROWS} td:first-child'))"
                          ".map(td => td.textContent)")
    assert HOSTILE + " (random init)" in names


def test_sort_from_url_fragment_and_full_page(browser, site, tmp_path):
    browser.open(site.as_uri() + "#sort=t-seg-probe-p1:0:asc")
    names = _column(browser, "t-seg-probe-p1", 0)
    assert names == sorted(names) and len(names) == len(MODELS) - 2  # the ceiling and floor rows apart
    _check_png(browser.screenshot(tmp_path / "4-full.png", full_page=True), W, 3000, exact=False)


# every run of letters or digits of visible text (code and hashes aside) that the layout split over two lines
MID_WORD_BREAKS = r"""(() => {
  const out = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest('script,style,code,.mono,.paths,details:not([open])')) continue;
    const model = el.closest('td:first-child') !== null;
    for (const m of n.textContent.matchAll(/[\p{L}\p{N}]{2,}/gu)) {
      // a model name is an identifier: one longer than 24 characters may break anywhere to fit
      const token = n.textContent.slice(0, m.index).split(/\s/).pop() +
                    n.textContent.slice(m.index).split(/\s/)[0];
      if (model && token.length > 24) continue;
      const range = document.createRange();
      range.setStart(n, m.index);
      range.setEnd(n, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                           .map(r => Math.round(r.top)));
      if (tops.size > 1) out.push(m[0]);
    }
  }
  return out;
})()"""


def _summaries(b) -> list[dict]:
    """Each summary table: its title, header, and per body the rows as [model, [cell text], [cell class]]."""
    return b.evaluate("""Array.from(document.querySelectorAll('#summary section.sum')).map(s => ({
        title: s.querySelector('h3').textContent,
        head: Array.from(s.querySelector('table.lb').querySelectorAll('thead th'))
            .map(th => th.firstChild.textContent),
        notes: Array.from(s.querySelectorAll('ul.notes li')).map(li => li.textContent),
        bodies: Object.fromEntries(Array.from(s.querySelector('table.lb').querySelectorAll('tbody'))
            .map(tb => [tb.className,
            Array.from(tb.rows).map(r => [r.getAttribute('data-model'),
                Array.from(r.cells).map(c => c.firstChild ? c.firstChild.textContent : ''),
                Array.from(r.cells).map(c => c.className)])]))}))""")


@pytest.mark.parametrize("size", [(W, H), PHONE], ids=["1400x900", "390x844"])
def test_summary_per_protocol_verdict_in_view_no_mid_word_break(browser, site, tmp_path, size):
    width, height = size
    browser.resize(width, height)
    try:
        browser.open(site.as_uri())
        assert browser.evaluate("[window.innerWidth, window.innerHeight]") == [width, height]
        assert browser.evaluate("document.documentElement.scrollWidth") <= width, "page wider than the window"
        tables = _summaries(browser)
        assert [t["title"] for t in tables] == ["Summary — probe v1 (test)",
                                                "Summary — eval person-vs-background-v1"]
        probe, reference = tables
        seg = probe["head"].index("seg: mIoU % ↑")
        probe_seg = [float(cells[seg]) for body in probe["bodies"].values() for _, cells, _ in body]
        assert max(probe_seg) < 100 * max(q for *_, q in MODELS) + 1e-6
        assert REFERENCE[0] not in [m for body in probe["bodies"].values() for m, *_ in body]
        # the reference system alone, in a table with only its task's column: 85.00 shares no column
        assert reference["head"] == ["model", "kind", "seg: mIoU % ↑"]
        assert [(m, cells[2]) for m, cells, _ in reference["bodies"]["ranked"]] == [(REFERENCE[0], "85.00")]
        # the ceiling and floor rows are references: apart from the ranked rows and never bolded
        assert sorted(m for m, *_ in probe["bodies"]["ceiling"]) == ["floor", "gt-oracle"]
        assert not any("best" in c for _, _, classes in probe["bodies"]["ceiling"] for c in classes)
        best = {probe["head"][j]: m for m, _, classes in probe["bodies"]["ranked"]
                for j, c in enumerate(classes) if "best" in c}
        assert best["seg: mIoU % ↑"] == "dinov2_small (random init)"  # the best quality is a random init
        assert any("random-init row ranks first" in n and "19x14 tokens" in n for n in probe["notes"])
        assert "pointmap: L2 cm ↓" in probe["head"] and not any("x1e" in h for h in probe["head"])
        # the verdict column of the paired comparisons is in view (1400) or right after the pair (phone)
        heads = browser.evaluate("Array.from(document.querySelectorAll('#comparisons-table th'))"
                                 ".map(th => th.textContent)")
        verdict = heads.index("verdict")
        assert verdict == 3, heads
        browser.evaluate("document.getElementById('comparisons').scrollIntoView()")
        box = browser.rect("#comparisons .scroll")
        cells = browser.evaluate("Array.from(document.querySelectorAll('#comparisons-table tr'))"
                                 ".map(r => JSON.parse(JSON.stringify(r.cells[arguments[0]]"
                                 ".getBoundingClientRect())))", verdict)
        assert len(cells) == 1 + len(COMPARISONS) + len(VERDICTS)
        if width == W:
            for r in cells:
                assert r["right"] <= min(box["right"], width) + 0.5, f"verdict cut off: {r} vs {box}"
        spill = browser.evaluate("Array.from(document.querySelectorAll('#summary td'))"
                                 ".filter(td => td.scrollWidth > td.clientWidth + 1)"
                                 ".map(td => td.textContent)")
        assert not spill, f"text runs out of its summary cell at {width}x{height}: {spill}"
        broken = browser.evaluate(MID_WORD_BREAKS)
        assert not broken, f"words broken mid-word at {width}x{height}: {broken[:10]}"
        browser.evaluate("window.scrollTo(0, 0)")
        if (width, height) == PHONE:  # a number on the first screen
            first = browser.evaluate("""(() => { const c = Array.from(document.querySelectorAll(
                '#summary td[data-v]')).find(td => td.getAttribute('data-v') !== '' &&
                !isNaN(Number(td.getAttribute('data-v'))));
                return c ? JSON.parse(JSON.stringify(c.getBoundingClientRect())) : null; })()""")
            assert first and 0 <= first["top"] and first["bottom"] <= height, first
            assert first["right"] <= width, first
        _check_png(browser.screenshot(tmp_path / f"5-summary-{width}x{height}.png"), width, height)
    finally:
        browser.resize(W, H)


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


VERDICT_TABLE = "#summary table[id$='-verdicts']"


@pytest.mark.parametrize("size", [(W, H), PHONE], ids=["1400x900", "390x844"])
def test_summary_ranks_gap_and_verdicts_fit_the_screen(browser, site, tmp_path, size):
    """The first table says rank and gap closed; its verdict table is on screen without sideways scrolling
    (on a phone both are cards: one block per backbone, each value beside its column's name)."""
    width, height = size
    browser.resize(width, height)
    try:
        browser.open(site.as_uri())
        probe = _summaries(browser)[0]
        assert "seg: gap closed" in probe["head"]
        assert browser.evaluate("document.documentElement.scrollWidth") <= width, "page wider than the window"
        subs = browser.evaluate("Array.from(document.querySelectorAll('#summary section.sum')[0]"
                                ".querySelectorAll('tbody.ranked td span.sub')).map(s => s.textContent)")
        assert any(s.startswith("rank ") for s in subs), subs
        rows = browser.evaluate(f"Array.from(document.querySelectorAll(\"{VERDICT_TABLE} tbody tr\"))"
                                ".map(r => [r.getAttribute('data-model'), Array.from(r.cells).map(c => "
                                "c.textContent)])")
        assert [m for m, _ in rows] == ["sapiens2_0.1b (random init)", "pixels"]
        assert rows[0][1][1:] == ["▲ floor▼ twin"] * 4
        assert rows[1][1][1:] == ["= floor (identical)"] * 4  # exactly 0 [0, 0]: the same predictions
        browser.evaluate(f"document.querySelector(\"{VERDICT_TABLE}\").scrollIntoView()")
        for r in browser.evaluate(f"Array.from(document.querySelectorAll(\"{VERDICT_TABLE} td\"))"
                                  ".map(td => JSON.parse(JSON.stringify(td.getBoundingClientRect())))"):
            assert r["left"] >= 0 and r["right"] <= width + 0.5, f"a verdict is off-screen at {width}: {r}"
        assert browser.evaluate(f"document.querySelector(\"{VERDICT_TABLE}\").closest('.scroll')"
                                f".scrollWidth <= document.querySelector(\"{VERDICT_TABLE}\")"
                                ".closest('.scroll').clientWidth + 1"), "the verdict table scrolls sideways"
        cards = browser.evaluate("getComputedStyle(document.querySelector('#summary thead')).display")
        assert (cards == "none") == (width == PHONE[0]), cards  # cards on the phone only
        if width == PHONE[0]:  # each value stands beside its column's name, inside the screen
            label = browser.evaluate("getComputedStyle(document.querySelector('#summary tbody.ranked "
                                     "td:nth-child(3)'), '::before').content")
            assert "pose" in label, label
            for r in browser.evaluate("Array.from(document.querySelectorAll('#summary td'))"
                                      ".map(td => JSON.parse(JSON.stringify(td.getBoundingClientRect())))"):
                assert r["right"] <= width + 0.5, f"a summary cell is off-screen: {r}"
        _check_png(browser.screenshot(tmp_path / f"6-verdicts-{width}x{height}.png"), width, height)
        browser.evaluate("window.scrollTo(0, 0)")
        _check_png(browser.screenshot(tmp_path / f"6-summary-top-{width}x{height}.png"), width, height)
    finally:
        browser.resize(W, H)
