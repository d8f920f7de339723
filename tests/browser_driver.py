"""Drive headless Chromium through the DevTools protocol, with only the standard library.

Used by the browser test of the leaderboard page: open the page, click a column header, read the
resulting row order from the live DOM and take a screenshot. Playwright/Selenium are not needed:
Chromium is started with ``--remote-debugging-port=0``, the port is read from the
``DevToolsActivePort`` file it writes, and a minimal RFC 6455 websocket client speaks CDP.

Example::

    with HeadlessChromium() as browser:
        browser.open("file:///tmp/site/index.html")
        browser.evaluate("document.querySelector('th').click()")
        browser.screenshot("shot.png")
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--hide-scrollbars", "--mute-audio",
]
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def find_chromium() -> str | None:
    """Path of a Chromium binary (``$SAPIENS2_CHROMIUM``, ``chromium``, ``chromium-browser``) or None."""
    env = os.environ.get("SAPIENS2_CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class WebSocket:
    """Minimal client websocket (text frames, masking, fragmentation, ping/pong, close)."""

    def __init__(self, url: str, timeout: float = 30.0):
        u = urlparse(url)
        if u.scheme != "ws":
            raise ValueError(f"{url}: only ws:// URLs are supported")
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        path = u.path + (f"?{u.query}" if u.query else "")
        request = (f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode("ascii"))
        header = b""
        while b"\r\n\r\n" not in header:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"{url}: connection closed during the websocket handshake")
            header += chunk
        head, self._buf = header.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise ConnectionError(f"{url}: websocket handshake refused: {lines[0]}")
        expected = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode("ascii")).digest()).decode("ascii")
        accept = next((ln.split(":", 1)[1].strip() for ln in lines
                       if ln.lower().startswith("sec-websocket-accept")), None)
        if accept != expected:
            raise ConnectionError(f"{url}: bad Sec-WebSocket-Accept in the handshake")

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise ConnectionError("websocket closed by the peer")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text: str) -> None:
        """Send one text message."""
        self._send_frame(0x1, text.encode("utf-8"))

    def recv(self) -> str:
        """Receive one complete text message (answers pings, raises on close)."""
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            opcode, fin = b0 & 0x0F, b0 & 0x80
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode("utf-8")

    def close(self) -> None:
        """Send a close frame and close the socket."""
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class HeadlessChromium:
    """A headless Chromium process with one page, controlled over CDP.

    Args:
        binary: Chromium executable; ``find_chromium()`` by default.
        width, height: viewport size in CSS pixels.
        timeout: seconds to wait for start-up, page loads and each command.
    """

    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 900,
                 timeout: float = 60.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise FileNotFoundError("chromium: no Chromium binary found (install Debian's 'chromium')")
        self.width, self.height, self.timeout = width, height, timeout
        self._next_id = 0
        self.proc: subprocess.Popen | None = None
        self.ws: WebSocket | None = None
        self.events: list[dict] = []

    def __enter__(self) -> HeadlessChromium:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start the browser and attach to its first page."""
        self._profile = tempfile.mkdtemp(prefix="sapiens2-chromium-")
        args = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
                f"--window-size={self.width},{self.height}", "about:blank"]
        self._log = open(Path(self._profile) / "chromium.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start: {self._tail_log()}")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        ws_url = None
        while ws_url is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    targets = json.load(r)
                ws_url = next((t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"), None)
            except OSError:
                pass
            if ws_url is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"chromium: no page target to attach to: {self._tail_log()}")
                time.sleep(0.1)
        self.ws = WebSocket(ws_url, timeout=self.timeout)
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    def _tail_log(self) -> str:
        try:
            self._log.flush()
            return (Path(self._profile) / "chromium.log").read_text(errors="replace")[-1500:]
        except OSError:
            return "(no log)"

    def call(self, method: str, params: dict | None = None) -> dict:
        """Send one CDP command and return its result (events received meanwhile are kept)."""
        if self.ws is None:
            raise RuntimeError("chromium: not started")
        self._next_id += 1
        my_id = self._next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"chromium: {method} failed: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str) -> dict:
        """Wait for the next event named ``method`` (or return one already received)."""
        for i, ev in enumerate(self.events):
            if ev["method"] == method:
                return self.events.pop(i)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self.events.append(msg)

    def open(self, url: str) -> None:
        """Load ``url`` afresh (scripts run again even if only the fragment changed) and wait for it."""
        for target in ("about:blank", url):
            self.events.clear()
            result = self.call("Page.navigate", {"url": target})
            if result.get("errorText"):
                raise RuntimeError(f"chromium: cannot open {target}: {result['errorText']}")
            self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """Evaluate a JavaScript expression in the page and return its JSON value."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            detail = result["exceptionDetails"]
            text = detail.get("exception", {}).get("description") or detail.get("text")
            raise RuntimeError(f"chromium: script error: {text}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: str | os.PathLike, full_page: bool = False) -> Path:
        """Write a PNG screenshot of the viewport (or the whole page) to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000),
                              "scale": 1}
            params["captureBeyondViewport"] = True
        data = base64.b64decode(self.call("Page.captureScreenshot", params)["data"])
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def stop(self) -> None:
        """Close the connection, end the browser process and delete its profile."""
        if self.ws is not None:
            try:
                self.call("Browser.close")
            except (OSError, RuntimeError, ConnectionError):
                pass
            self.ws.close()
            self.ws = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None
        if getattr(self, "_log", None):
            self._log.close()
        shutil.rmtree(getattr(self, "_profile", ""), ignore_errors=True)
