"""Local paths in published records: relative to a declared root, else the file name alone.

A record is shared (a leaderboard, a report, a paper's supplement), so it must not carry the
author's file system: ``/home/alice/ckpt/sapiens2_0.4b.safetensors`` says nothing a reader can use
and shows a user name. What identifies a file is its SHA-256 (recorded beside it); where it lives is
said only relative to a root the author declares with ``$SAPIENS2_RECORD_ROOT`` (e.g. the project or
checkpoint folder): a path inside it is written relative to it, any other path as its file name.

Example:
    >>> import os
    >>> os.environ.pop(ROOT_ENV, None) and None
    >>> public_path("/home/alice/ckpt/sapiens2_0.4b.safetensors")
    'sapiens2_0.4b.safetensors'
    >>> os.environ[ROOT_ENV] = "/home/alice"
    >>> public_path("/home/alice/ckpt/sapiens2_0.4b.safetensors")
    'ckpt/sapiens2_0.4b.safetensors'
    >>> public_command(["/usr/bin/sapiens2-bench", "probe", "--weights", "/tmp/w.pt", "--out=/home/alice/o"])
    ['sapiens2-bench', 'probe', '--weights', 'w.pt', '--out=o']
    >>> del os.environ[ROOT_ENV]
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT_ENV", "public_command", "public_path", "public_weights", "record_root"]

ROOT_ENV = "SAPIENS2_RECORD_ROOT"


def record_root() -> Path | None:
    """The declared root (``$SAPIENS2_RECORD_ROOT``, absolute), or None."""
    text = os.environ.get(ROOT_ENV, "").strip()
    return Path(os.path.abspath(os.path.expanduser(text))) if text else None


def public_path(path: str | os.PathLike) -> str:
    """``path`` as a record may show it: relative to the declared root when inside it, else its name.

    A relative path is taken relative to the current folder first (it names a local file too).
    """
    full = Path(os.path.abspath(os.fspath(path)))
    root = record_root()
    if root is not None and (full == root or root in full.parents):
        return full.relative_to(root).as_posix() or "."
    return full.name or str(path)


def public_weights(weights: str | None) -> str | None:
    """A backbone's ``weights`` for a record: a local file's path made public; labels (``none``,
    ``random(seed=0)``, a hub id such as ``facebook/dinov2-small``) unchanged."""
    if weights is None:
        return None
    text = str(weights)
    if os.path.isabs(text) or os.path.exists(text):
        return public_path(text)
    return text


def _public_arg(arg: str) -> str:
    if os.path.isabs(arg):
        return public_path(arg)
    if "=" in arg:  # --flag=/abs/path, NAME=/abs/path
        key, value = arg.split("=", 1)
        if os.path.isabs(value):
            return f"{key}={public_path(value)}"
    return arg


def public_command(argv: list[str]) -> list[str]:
    """A command line for a record: every absolute path in it made public (:func:`public_path`)."""
    return [_public_arg(str(a)) for a in argv]
