"""End-to-end parity on the shared golden sets through the console command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli.main import main


@pytest.mark.parametrize("which", ["models", "metrics"])
def test_parity_passes_on_golden(shared_dir, tmp_path, which, capsys):
    out = tmp_path / f"parity_{which}.json"
    code = main(["parity", str(shared_dir / "golden" / which), "--json", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    manifest = json.loads((shared_dir / "golden" / which / "manifest.json").read_text())
    assert [c["name"] for c in report["cases"]] == [c["name"] for c in manifest["cases"]]
    failed = [c for c in report["cases"] if not c["passed"]]
    assert code == 0 and not failed, printed


def test_parity_runs_every_golden_set_under_a_parent_folder(tmp_path, capsys):
    """``parity DIR`` on a folder of golden sets runs each set; one failing case fails the whole run."""
    for sub, kind in (("a", "mystery"), ("b", "riddle")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "manifest.json").write_text(json.dumps({"cases": [{"name": "x", "kind": kind}]}))
    out = tmp_path / "r.json"
    assert main(["parity", str(tmp_path), "--json", str(out)]) == 1
    assert [c["name"] for c in json.loads(out.read_text())["cases"]] == ["a/x", "b/x"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["parity", str(empty)]) != 0
    assert "no manifest.json" in capsys.readouterr().err


def test_parity_fails_on_perturbed_golden(shared_dir, tmp_path):
    """A golden set whose expected output is nudged beyond tolerance must fail (exit code 1)."""
    from safetensors.torch import load_file, save_file

    src = shared_dir / "golden" / "models"
    manifest = json.loads((src / "manifest.json").read_text())
    case = next(c for c in manifest["cases"] if c["name"] == "backbone_tiny_rope_fp32")
    tensors = load_file(str(src / case["file"]))
    key = next(k for k in tensors if k.startswith("output."))
    tensors[key] = tensors[key] + 10 * case["tolerance"]["abs"]
    save_file(tensors, str(tmp_path / case["file"]))
    manifest["cases"] = [case]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert main(["parity", str(tmp_path)]) == 1


def test_parity_reports_unknown_kind(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text(json.dumps({"cases": [{"name": "x", "kind": "mystery"}]}))
    out = tmp_path / "r.json"
    assert main(["parity", str(tmp_path), "--json", str(out)]) == 1
    case = json.loads(out.read_text())["cases"][0]
    assert case["passed"] is False and "mystery" in case["message"]


def test_console_script_installed():
    exe = str(Path(sys.executable).parent / "sapiens2-bench")
    if not Path(exe).exists():
        exe = shutil.which("sapiens2-bench") or exe
    res = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "parity" in res.stdout
