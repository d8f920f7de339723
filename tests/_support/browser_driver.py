"""Headless Chromium for the browser test, driven by Selenium and Debian's ``chromium-driver``.

Selenium (the ``test`` extra) speaks WebDriver to ``chromedriver``, which starts Debian's
``chromium``; ``scripts/install_chromium.sh`` installs both packages in CI. No browser is
downloaded: the binaries are found on the machine (``$SAPIENS2_CHROMIUM`` / ``$SAPIENS2_CHROMEDRIVER``
override the search), and :func:`missing_reason` says what is missing when one is not there.

The viewport is set exactly (``Emulation.setDeviceMetricsOverride``), so a 1400 x 900 page is
1400 x 900 CSS pixels whatever the window decorations; clicks and typing are real WebDriver input
events (a click lands on the element's centre, typing fires ``input`` events).

Example::

    with Browser(width=1400, height=900) as b:
        b.open("file:///tmp/site/index.html")
        b.click("#t-seg-probe-p1 thead th:nth-child(2)")
        b.type("#model-filter", "sapiens")
        b.screenshot("shot.png")
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRIVER_PATHS = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-first-run", "--disable-extensions", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--mute-audio")


def find_chromium() -> str | None:
    """Path of a Chromium binary (``$SAPIENS2_CHROMIUM``, then ``chromium`` and friends on PATH) or None."""
    env = os.environ.get("SAPIENS2_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def find_chromedriver() -> str | None:
    """Path of ``chromedriver`` (``$SAPIENS2_CHROMEDRIVER``, PATH, Debian's locations) or None."""
    env = os.environ.get("SAPIENS2_CHROMEDRIVER")
    if env:
        return env if Path(env).is_file() else None
    return shutil.which("chromedriver") or next((p for p in DRIVER_PATHS if Path(p).is_file()), None)


def missing_reason() -> str | None:
    """Why the browser test cannot run here (a missing binary), or None when it can."""
    missing = []
    if find_chromium() is None:
        missing.append("no Chromium binary (Debian package 'chromium')")
    if find_chromedriver() is None:
        missing.append("no chromedriver (Debian package 'chromium-driver')")
    if not missing:
        return None
    return "; ".join(missing) + ": run scripts/install_chromium.sh as root"


class Browser:
    """One headless Chromium session with an exact viewport (use as a context manager)."""

    def __init__(self, width: int = 1400, height: int = 900, timeout: float = 30.0):
        self.width, self.height, self.timeout = width, height, timeout
        self.driver = None

    def __enter__(self) -> Browser:
        reason = missing_reason()
        if reason:
            raise RuntimeError(reason)
        options = webdriver.ChromeOptions()
        options.binary_location = find_chromium()
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(find_chromedriver()), options=options)
        self.driver.set_page_load_timeout(self.timeout)
        self.driver.set_script_timeout(self.timeout)
        self.resize(self.width, self.height)
        return self

    def __exit__(self, *exc) -> None:
        if self.driver is not None:
            self.driver.quit()
            self.driver = None

    def resize(self, width: int, height: int) -> None:
        """Set the viewport to exactly ``width`` x ``height`` CSS pixels (device scale 1)."""
        self.width, self.height = width, height
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)

    def open(self, url: str) -> None:
        """Load ``url`` afresh; returns once the page's load event has fired.

        The page is always loaded anew (through ``about:blank``): going from ``page.html`` to
        ``page.html#x`` would otherwise only change the fragment, and no script would run again.
        """
        self.driver.get("about:blank")
        self.driver.get(url)

    def evaluate(self, expression: str, *args) -> Any:
        """The value of a JavaScript expression (``arguments[i]`` are ``args``)."""
        return self.driver.execute_script(f"return ({expression});", *args)

    def element(self, selector: str):
        """The first element matching a CSS selector (raises NoSuchElementException)."""
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def click(self, selector: str) -> None:
        """A real click on the element's centre (scrolled into view first)."""
        el = self.element(selector)
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
        el.click()

    def type(self, selector: str, text: str, clear: bool = True) -> None:
        """Type ``text`` into an input as key presses (each fires an ``input`` event)."""
        el = self.element(selector)
        if clear:
            el.clear()
            self.driver.execute_script("arguments[0].dispatchEvent(new Event('input'));", el)
        el.send_keys(text)

    def rect(self, selector: str) -> dict:
        """``getBoundingClientRect()`` of the first match, as a dict (left, top, right, bottom, ...)."""
        return self.evaluate("JSON.parse(JSON.stringify(document.querySelector(arguments[0])"
                             ".getBoundingClientRect()))", selector)

    def screenshot(self, path: str | os.PathLike, full_page: bool = False) -> Path:
        """Save a PNG of the viewport (or the whole page) and return its path."""
        path = Path(path)
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            root = "document.documentElement"
            size = self.evaluate(f"[{root}.scrollWidth, {root}.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", params)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
