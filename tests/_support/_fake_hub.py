"""A local stand-in for the few Hugging Face Hub endpoints that ``huggingface_hub`` downloads use.

Serves, from memory, for each repository ``{filename: bytes}``:

- ``GET /api/models/{org}/{name}[/revision/{rev}]`` (``model_info(files_metadata=True)``): the file
  listing with sizes and, for ``.safetensors``/``.pth`` files, LFS metadata (SHA-256, size);
- ``HEAD``/``GET /{org}/{name}/resolve/{rev}/{filename}`` (``hf_hub_download``): the bytes, with the
  ``X-Repo-Commit`` and ``ETag`` headers the client needs (ETag = the SHA-256 for LFS files, as the hub's
  ``X-Linked-Etag``).

Unknown repositories answer 404 with ``X-Error-Code: RepositoryNotFound``. ``lfs_sha256`` overrides the
listed checksum (to test a corrupt download). Every request is recorded in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_LFS = (".safetensors", ".pth")


class FakeHub:
    """Context manager running the fake hub on 127.0.0.1 in a thread; ``url`` is its endpoint."""

    def __init__(self, repos: dict[str, dict[str, bytes]],
                 lfs_sha256: dict[tuple[str, str], str] | None = None):
        self.repos = repos
        self.lfs_sha256 = lfs_sha256 or {}
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _listing(self, repo: str) -> dict:
        siblings = []
        for name, data in sorted(self.repos[repo].items()):
            entry = {"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest()}
            if name.endswith(_LFS):
                sha = self.lfs_sha256.get((repo, name), hashlib.sha256(data).hexdigest())
                entry["lfs"] = {"sha256": sha, "size": len(data), "pointerSize": 134}
            siblings.append(entry)
        return {"id": repo, "modelId": repo, "sha": COMMIT, "private": False, "siblings": siblings}

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlparse(handler.path).path)
        self.requests.append((handler.command, path))
        info = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        repo = (info or resolve).group(1) if (info or resolve) else None
        if repo not in self.repos:
            return self._send(handler, 404, b'{"error": "Repository not found"}', body,
                              {"X-Error-Code": "RepositoryNotFound", "Content-Type": "application/json"})
        if info:
            return self._send(handler, 200, json.dumps(self._listing(repo)).encode(), body,
                              {"Content-Type": "application/json"})
        name = resolve.group(3)
        data = self.repos[repo].get(name)
        if data is None:
            return self._send(handler, 404, b"not found", body,
                              {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})
        sha = hashlib.sha256(data).hexdigest() if name.endswith(_LFS) else hashlib.sha1(data).hexdigest()
        return self._send(handler, 200, data, body, {"X-Repo-Commit": COMMIT, "ETag": f'"{sha}"',
                                                     "Content-Type": "application/octet-stream"})

    @staticmethod
    def _send(handler, code: int, data: bytes, body: bool, headers: dict) -> None:
        handler.send_response(code)
        for k, v in headers.items():
            handler.send_header(k, v)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)
