"""The embedded split's generator: realistic by default for ``data synth`` and ``run``, procedural by
name (and under ``run --quick``), an unknown name a clear error naming ``--generator``, and the
split cache's key telling the generators and their render settings apart."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli.main import main
from benchmarks.embedded_split import default_data_dir, split_generator
from benchmarks.job_defaults import SPLIT_RENDER, SPLIT_SPP
from benchmarks.probe.protocol import default_protocol, quick_protocol


def _synth_args(*argv: str):
    """The parsed ``data synth`` flags (no rendering)."""
    from benchmarks.cli.main import build_parser

    return build_parser().parse_args(["data", "synth", "--out", "never", *argv])


def test_data_synth_renders_the_realistic_split_by_default_with_the_main_jobs_settings():
    from benchmarks.cli.data import _generator

    settings = _generator(_synth_args())
    assert settings is not None, "data synth's default generator is not the realistic one"
    assert (settings.mode, settings.spp) == (SPLIT_RENDER, SPLIT_SPP) == ("path", 64)
    assert _generator(_synth_args("--render", "fast")).mode == "fast"
    assert _generator(_synth_args("--spp", "64")).spp == 64
    assert _generator(_synth_args("--generator", "procedural")) is None
    # the main job's split and data synth's defaults are one split (one cache key)
    assert split_generator() == settings
    assert split_generator(quick=True) is None, "run --quick is the tests' procedural split"
    assert split_generator("realistic", quick=True) == settings


def test_procedural_by_name_renders_the_procedural_split(tmp_path):
    out = tmp_path / "p"
    assert main(["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "2",
                 "--size", "48x32"]) == 0
    info = json.loads((out / "split.json").read_text())
    assert info["generator"] == "sapiens2-bench synth" and info["n"] == 2 and "render" not in info


@pytest.mark.parametrize("argv", [
    ["data", "synth", "--generator", "photoreal", "--out", "OUT", "--n", "1"],
    ["run", "--generator", "photoreal", "--out", "OUT", "--no-mediapipe"],
    ["run", "--quick", "--generator", "photoreal", "--out", "OUT", "--no-mediapipe"],
    ["probe", "--backbone", "pixels", "--generator", "photoreal", "--out", "OUT"],
])
def test_an_unknown_generator_is_an_error_naming_the_flag(argv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(out) if a == "OUT" else a for a in argv]) != 0
    err = capsys.readouterr().err
    assert "--generator" in err and "photoreal" in err and "realistic" in err and "procedural" in err, err
    assert not out.exists(), "an unknown generator did work before failing"


def test_run_refuses_generator_with_data_and_realistic_flags_on_procedural(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--generator", "procedural", "--data", str(tmp_path), "--out", str(out)]) != 0
    assert "--generator procedural chooses the embedded split; not with --data" in capsys.readouterr().err
    assert not out.exists()
    assert main(["data", "synth", "--generator", "procedural", "--render", "path", "--out", str(out)]) != 0
    assert "--render applies to --generator realistic only" in capsys.readouterr().err
    assert main(["data", "synth", "--spp", "0", "--out", str(out)]) != 0
    assert "--spp 0" in capsys.readouterr().err


def test_the_cache_key_differs_by_generator_and_render_settings():
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings
    from sapiens2.datasets.synth.writer import split_key

    hw = (256, 192)
    keys = {
        "procedural": split_key("probe", 384, hw, 0, None),
        "default": split_key("probe", 384, hw, 0, split_generator()),
        "path32": split_key("probe", 384, hw, 0, RealisticSettings(mode="path", spp=32)),
        "fast": split_key("probe", 384, hw, 0, RealisticSettings(mode="fast")),
        "people1": split_key("probe", 384, hw, 0, split_generator(people=1)),
        "photo": split_key("probe", 384, hw, 0, split_generator(scenes="photo")),
    }
    assert len(set(keys.values())) == len(keys), keys
    assert split_key("probe", 384, hw, 0, split_generator()) == keys["default"], "the key is not stable"
    assert split_generator(scenes="default") == split_generator(), "naming the default mix is the default"
    with pytest.raises(ValueError, match="--scenes applies to --generator realistic only"):
        split_generator("procedural", scenes="photo")
    with pytest.raises(ValueError, match="--scenes 'hard'"):
        split_generator(scenes="hard")


def test_default_data_dir_asks_the_cache_for_the_generator(monkeypatch, tmp_path):
    import benchmarks.embedded_split as embedded  # default_data_dir looks ensure_default_split up here

    calls = []

    def fake_split(name, n, size, seed, **kw):
        calls.append((n, tuple(size), kw["generator"], kw["workers"]))
        return tmp_path

    monkeypatch.setattr(embedded, "ensure_default_split", fake_split)
    default_data_dir(default_protocol())
    default_data_dir(default_protocol(), generator="procedural")
    default_data_dir(quick_protocol(), quick=True)
    (n, size, realistic, workers), procedural, quick = calls
    assert (n, size) == (384, tuple(default_protocol().input_size))
    assert realistic == split_generator() and 1 <= workers <= 2
    assert procedural[2] is None and procedural[:2] == (n, size)
    assert quick[2] is None and quick[0] == 96


def test_a_missing_renderer_names_the_extra_and_the_procedural_way_out(monkeypatch, tmp_path):
    import importlib.util

    import benchmarks.embedded_split as embedded  # default_data_dir looks ensure_default_split up here
    from sapiens2.datasets.synth.realistic.variant import RendererMissingError, require_mitsuba
    from sapiens2.errors import BenchError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mitsuba" else real(name))

    def split_needing_mitsuba(name, n, size, seed, **kw):
        require_mitsuba()
        return tmp_path

    monkeypatch.setattr(embedded, "ensure_default_split", split_needing_mitsuba)
    with pytest.raises(BenchError, match="'mitsuba' package") as info:
        default_data_dir(default_protocol())
    assert "'realistic' extra" in str(info.value) and "--generator procedural" in str(info.value)
    assert isinstance(info.value.__cause__, RendererMissingError)
