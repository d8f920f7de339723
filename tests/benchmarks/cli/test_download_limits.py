"""``download``: a --file that would leave the repository snapshot is refused, and a hub that accepts the
connection but never answers ends in a clear error after --timeout (no hang)."""

from __future__ import annotations

import socket
import threading

from tests.benchmarks.cli.test_download import SEG_REPO, _download, _files, env, tiny_files  # noqa: E402, F401

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_a_file_outside_the_snapshot_is_never_placed(env, tiny_files, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = env["cache"] / ("models--" + SEG_REPO.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    outside = env["cache"].parent / "outside.safetensors"
    outside.write_bytes(tiny_files[0])
    rel = "../../../../outside.safetensors"
    assert (snapshot / rel).resolve() == outside.resolve()
    code = _download(env, "--tasks", "seg", "--sizes", "0.4b", "--file", rel, "--skip-key-check")
    assert code == 1
    assert "not a file of the repository" in capsys.readouterr().err
    assert _files(env["root"]) == []


class SilentServer:
    """Listens on 127.0.0.1 and accepts connections but never answers; closed when the block ends."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.stop, self.conns = threading.Event(), []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self):
        while not self.stop.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except (TimeoutError, OSError):
                continue

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


def test_a_hub_that_never_answers_times_out_clearly(env, monkeypatch, capsys):  # noqa: F811
    result = {}
    with SilentServer() as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        worker = threading.Thread(
            target=lambda: result.setdefault("code", _download(env, "--tasks", "seg", "--sizes", "0.4b",
                                                               "--timeout", "1")), daemon=True)
        worker.start()
        worker.join(60)  # far above --timeout 1; a hang would still be running here
        hung = worker.is_alive()
    assert not hung, "download waited for an answer that never came"
    assert result["code"] == 1
    out = capsys.readouterr().out
    assert "no answer within 1 s (--timeout)" in out
    assert f"{SEG_REPO}: cannot reach the Hugging Face Hub" in out
