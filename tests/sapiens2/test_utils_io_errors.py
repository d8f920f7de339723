"""A write that fails on a full disk says "no space left on device" and names the path, whatever the writer's
own message (torch.save says "unexpected pos ..."); nothing is left behind."""

from __future__ import annotations

import errno
import shutil
from collections import namedtuple

import pytest

from sapiens2 import utils_io

Usage = namedtuple("Usage", "total used free")


def test_a_full_disk_is_named_with_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10 << 30, 10 << 30, 4096))

    def torch_like_writer(tmp):
        with open(tmp, "wb") as f:
            f.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 2")

    target = tmp_path / "train_state.pt"
    with pytest.raises(OSError, match=r"no space left on device while writing .*train_state\.pt") as e:
        utils_io.atomic_write(target, torch_like_writer)
    assert e.value.errno == errno.ENOSPC and "unexpected pos" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_enospc_itself_is_named_and_other_errors_pass_through(tmp_path):
    def enospc(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"no space left on device while writing .*x\.json \(ENOSPC"):
        utils_io.atomic_write(tmp_path / "x.json", enospc)

    def other(tmp):
        raise ValueError("not about space")

    with pytest.raises(ValueError, match="not about space"):  # plenty of space: the writer's own error
        utils_io.atomic_write(tmp_path / "y.json", other)
    assert list(tmp_path.iterdir()) == []
