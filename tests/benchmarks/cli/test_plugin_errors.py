"""A plug-in backbone whose own code fails at import (sys.exit, NameError, SyntaxError) is named as the
plug-in's error with exit 1, never a silent exit 0 or a traceback blamed on sapiens2-bench."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main

BODIES = {
    "plug_exit": ("import sys\nsys.exit(0)\n", r"called sys.exit\(0\) while being imported"),
    "plug_name": ("x = undefined_name\n", "NameError: name 'undefined_name' is not defined"),
    "plug_syntax": ("def broken(:\n", "SyntaxError"),
    "plug_missing_dep": ("import no_such_dependency_xyz\n", "ModuleNotFoundError: No module named"),
}


def _probe(tmp_path, *args) -> int:
    return main(["probe", *args, "--tasks", "seg", "--data", str(tmp_path / "never_read"),
                 "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("module", sorted(BODIES))
def test_a_plugin_failing_at_import_is_named(module, tmp_path, monkeypatch, capsys):
    body, why = BODIES[module]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{module}.py").write_text(body)
    monkeypatch.syspath_prepend(str(plugins))
    assert _probe(tmp_path, "--backbone", f"{module}:Thing") == 1
    err = capsys.readouterr().err
    assert f"the plug-in module '{module}' failed to import" in err and "error in the plug-in's code" in err
    import re

    assert re.search(why, err), err
    assert "most likely a bug in sapiens2-bench" not in err and not (tmp_path / "o").exists()


def test_an_included_file_calling_sys_exit_is_named(tmp_path, capsys):
    path = tmp_path / "plug_exit_include.py"
    path.write_text("import sys\nsys.exit(0)\n")
    assert _probe(tmp_path, "--include", str(path), "--backbone", "pixels") == 1
    err = capsys.readouterr().err
    assert f"--include {path}" in err and "sys.exit(0)" in err


def _plugin(name: str, patch=8, dims=3, forward=None):
    import torch.nn.functional as F

    from benchmarks.probe.backbones import ProbeBackbone
    from benchmarks.probe.registry import PROBE_BACKBONES

    def __init__(self, img_size=None):
        ProbeBackbone.__init__(self)
        self.patch_size, self.embed_dims, self.num_layers, self.has_cls = patch, dims, 1, False

    def default(self, x, layers):
        return [F.avg_pool2d(x, self.patch_size) for _ in layers], None

    cls = type(name, (ProbeBackbone,), {"__init__": __init__, "forward_layers": forward or default,
                                        "__module__": __name__})
    PROBE_BACKBONES.register_module(module=cls, force=True)
    return name


def _raises(self, x, layers):
    raise RuntimeError("boom inside the plug-in")


def _numpy(self, x, layers):
    import torch.nn.functional as F

    return [F.avg_pool2d(x, self.patch_size).numpy() for _ in layers], None


@pytest.mark.parametrize("name, kw, why", [
    ("RelRaises", {"forward": _raises}, r"forward_layers raised RuntimeError: boom inside the plug-in"),
    ("RelNumpy", {"forward": _numpy}, r"feature map of layer 0 is a numpy.ndarray, not a torch.Tensor"),
    ("RelPatchZero", {"patch": 0}, r"declares patch_size=0: each must be a positive integer"),
    ("RelEmbedZero", {"dims": 0}, r"declares embed_dims=0: each must be a positive integer"),
])
def test_a_plugin_failing_at_run_time_is_named_before_training(name, kw, why, tmp_path):

    from _probe_toy import make_toy_data

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones.base import PluginError

    with pytest.raises(PluginError, match=why) as err:
        run_probe(_plugin(name, **kw), ["albedo"], make_toy_data(tasks=("albedo",)), tmp_path,
                  protocol="quick")
    assert f"plug-in backbone {name} (module {__name__})" in str(err.value)
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("*.ckpt.pt"))
