"""Work too big for the machine is refused before it starts: an image over the pixel limit or the
available memory (from its header; nothing is decoded), and a pretraining recipe whose weights,
gradients and optimiser state alone do not fit."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from sapiens2.datasets.io import DatasetError, read_png, read_rgb


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header(path, width: int, height: int, colour_type: int = 2) -> None:
    """A PNG whose header declares ``width`` x ``height`` 8-bit pixels, with one empty data chunk."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b""))
                     + _chunk(b"IEND", b""))


@pytest.fixture
def little_memory(monkeypatch):
    """The process has 512 MiB left."""
    import sapiens2.memory

    monkeypatch.setattr(sapiens2.memory, "available_memory", lambda: 512 * 2**20)


@pytest.mark.parametrize("reader", [read_rgb, read_png])
def test_a_9000x9000_image_under_a_memory_limit_is_refused_before_decoding(reader, tmp_path, little_memory):
    path = tmp_path / "huge.png"
    _png_header(path, 9000, 9000)  # 81 megapixels: under Pillow's bomb limit, over 512 MiB to decode
    with pytest.raises(DatasetError) as e:
        reader(path)
    msg = str(e.value)
    assert str(path) in msg and "9000x9000" in msg and "512.0 MiB of memory is available" in msg


@pytest.mark.parametrize("reader", [read_rgb, read_png])
def test_an_image_over_the_pixel_limit_names_the_limit_and_its_switch(reader, tmp_path, monkeypatch):
    path = tmp_path / "bomb.png"
    _png_header(path, 8000, 8000)
    monkeypatch.setenv("SAPIENS2_MAX_IMAGE_PIXELS", "50000000")
    monkeypatch.setattr("PIL.Image.MAX_IMAGE_PIXELS", 89_478_485)  # restored after the test
    with pytest.raises(DatasetError) as e:
        reader(path)
    msg = str(e.value)
    assert str(path) in msg and "8000x8000 (64.0 megapixels)" in msg
    assert "over the limit of 50.0 megapixels" in msg and "SAPIENS2_MAX_IMAGE_PIXELS" in msg


def test_a_decompression_bomb_header_is_refused_with_the_limit(tmp_path):
    path = tmp_path / "bomb.jpg.png"
    _png_header(path, 30000, 30000)  # 900 megapixels: Pillow itself refuses at open
    with pytest.raises(DatasetError, match=r"bomb.jpg.png: image over the limit of 89.5 megapixels"):
        read_rgb(path)


def test_images_within_the_limits_read_as_before(tmp_path, little_memory):
    from PIL import Image

    arr = np.arange(48 * 32 * 3, dtype=np.uint8).reshape(48, 32, 3)
    Image.fromarray(arr).save(tmp_path / "ok.png")
    assert np.array_equal(read_rgb(tmp_path / "ok.png"), arr)
    assert np.array_equal(read_png(tmp_path / "ok.png"), arr)


def test_a_bad_pixel_limit_setting_is_named(tmp_path, monkeypatch):
    _png_header(tmp_path / "a.png", 8, 8)
    monkeypatch.setenv("SAPIENS2_MAX_IMAGE_PIXELS", "lots")
    with pytest.raises(DatasetError, match="SAPIENS2_MAX_IMAGE_PIXELS='lots': expected a positive number"):
        read_rgb(tmp_path / "a.png")


def test_a_real_address_space_limit_is_seen_by_the_reader(tmp_path):
    """Under ``ulimit -v`` (a child's, 300 MiB above what it has mapped) the 9000x9000 header is refused."""
    import subprocess
    import sys

    path = tmp_path / "huge.png"
    _png_header(path, 9000, 9000)
    child = (
        "import resource, sys\n"
        "from sapiens2.datasets.io import DatasetError, read_rgb\n"
        "vm = [int(x.split()[1]) * 1024 for x in open('/proc/self/status') if x.startswith('VmSize:')][0]\n"
        "hard = resource.getrlimit(resource.RLIMIT_AS)[1]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + 300 * 2**20, hard))\n"
        "try:\n    read_rgb(sys.argv[1])\nexcept DatasetError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert "9000x9000" in out.stdout and "of memory is available" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("recipe", ["smoke_tiny", "cpu_small", "cpu_small_mae"])
def test_the_parameter_arithmetic_is_a_tight_lower_bound_of_the_built_model(recipe):
    from sapiens2.pretrain.memory import estimate_memory
    from sapiens2.pretrain.recipes import get_recipe
    from sapiens2.pretrain.registry import build

    cfg = get_recipe(recipe)
    est = estimate_memory(cfg)
    model = build(dict(cfg["model"]))
    trained = sum(p.numel() for p in model.student.parameters())
    teacher = sum(p.numel() for p in model.teacher.parameters()) if model.teacher is not None else 0
    assert 0.97 * trained <= est.trained_params <= trained
    assert 0.97 * teacher <= est.teacher_params <= teacher
    assert est.firm_bytes == 16 * est.trained_params + 4 * est.teacher_params


def test_paper_1b_on_a_4gb_cpu_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from benchmarks.cli.main import main

    monkeypatch.setattr("sapiens2.pretrain.memory.available_memory", lambda: 4 * 2**30)
    out = tmp_path / "o"
    assert main(["pretrain", "--recipe", "paper_1b", "--data", str(tmp_path / "never_read"),
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "'paper_1b' does not fit on cpu" in err and "1.51B trained parameters need 28.1 GiB" in err
    assert "4.0 GiB free on cpu" in err and "Run it on a GPU (--device cuda) with at least" in err
    assert not out.exists()


def test_a_recipe_that_fits_passes_the_check(monkeypatch):
    from sapiens2.errors import BenchError
    from sapiens2.pretrain.memory import check_memory
    from sapiens2.pretrain.recipes import get_recipe

    monkeypatch.setattr("sapiens2.pretrain.memory.available_memory", lambda: 4 * 2**30)
    assert check_memory(get_recipe("cpu_small"), "cpu").firm_bytes < 2**30
    monkeypatch.setattr("sapiens2.pretrain.memory.available_memory", lambda: 2**20)
    with pytest.raises(BenchError, match="'cpu_small' does not fit on cpu"):
        check_memory(get_recipe("cpu_small"), "cpu")


def test_an_npy_map_larger_than_the_available_memory_is_refused_before_loading(tmp_path, little_memory):
    from sapiens2.datasets.io import read_map

    path = tmp_path / "big.npy"
    np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(9000, 9000, 3)).flush()  # sparse
    with pytest.raises(DatasetError) as e:
        read_map(path, "normal")
    msg = str(e.value)
    assert str(path) in msg and "(9000, 9000, 3) float32 needs 927.0 MiB" in msg
    assert "only 512.0 MiB of memory is available" in msg


def test_a_cgroup_limit_lowers_the_available_memory_and_page_cache_does_not_count(tmp_path, monkeypatch):
    import sapiens2.memory as memory

    mib = 2**20
    (tmp_path / "max").write_text(f"{1024 * mib}\n")
    (tmp_path / "current").write_text(f"{900 * mib}\n")
    (tmp_path / "stat").write_text(f"anon {300 * mib}\ninactive_file {600 * mib}\n")
    files = ((str(tmp_path / "max"), str(tmp_path / "current"), str(tmp_path / "stat"), "inactive_file"),)
    monkeypatch.setattr(memory, "_CGROUP_FILES", files)
    monkeypatch.setattr(memory, "_meminfo_available", lambda: 8192 * mib)
    monkeypatch.setattr(memory, "_rlimit_headroom", lambda: None)
    assert memory.available_memory() == (1024 - 300) * mib
    (tmp_path / "max").write_text("max\n")  # no limit: MemAvailable
    assert memory.available_memory() == 8192 * mib
