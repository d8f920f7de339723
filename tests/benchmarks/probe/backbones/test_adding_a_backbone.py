"""docs/adding_a_backbone.md, run as written: its plug-in class through `probe --list-backbones`,
`probe` (random init and with `--weights`) and every `sapiens2-bench run` line of the page, on a tiny
rendered split under the quick protocol (the page's flags kept, the split and the output folder added)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
DOC = ROOT / "docs" / "adding_a_backbone.md"

# one process (a fresh registry holding the plug-in); the CLI's entry point called once per command
_SCRIPT = """
import contextlib, io, json, sys
from benchmarks.cli.main import main
result = {}
for key, argv in json.loads(sys.argv[1]).items():
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    result[key] = {"code": code, "stdout": buf.getvalue()}
print(json.dumps(result))
"""


def _doc_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def _commands(prefix: str) -> list[list[str]]:
    lines = [line.split("#")[0].strip() for block in _doc_blocks("bash") for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(prefix)]


@pytest.mark.slow  # two main jobs and two probes, each in a fresh process
def test_the_walkthrough_runs_as_written(tmp_path):
    from sapiens2.datasets.synth import ensure_default_split
    from sapiens2.records.results import read_record

    data = ensure_default_split("add-backbone", 8, (64, 48), 3, root=tmp_path / "synth", progress=False)
    (code,) = _doc_blocks("python")
    plugin = tmp_path / "my_backbone.py"
    plugin.write_text(code, encoding="utf-8")

    def local(argv):  # the page's file name -> the copy written here
        return [str(plugin) if a == "my_backbone.py" else a for a in argv]

    tiny = ["--quick", "--data", str(data), "--tasks", "seg"]
    probes = _commands("sapiens2-bench probe")
    runs = _commands("sapiens2-bench run")
    assert len(probes) == 2 and len(runs) == 2 and all("--backbones" in r for r in runs)
    weights = tmp_path / "w.pt"
    argv = {
        "list": local(probes[0]),
        "probe": local(probes[1]) + tiny + ["--out", str(tmp_path / "probe")],
        "weights": local(probes[1]) + tiny + ["--out", str(tmp_path / "weights"), "--weights", str(weights)],
    }
    board = tmp_path / "board"  # both lines into one folder: the second reuses the first's records
    for i, r in enumerate(runs):
        argv[f"run{i}"] = local(r) + tiny + ["--no-mediapipe", "--no-paper", "--out", str(board)]
    # weights for the --weights route: the plug-in's own state dict, from a build of the doc's class
    save = (f"import runpy, torch; ns = runpy.run_path({str(plugin)!r}); "
            f"torch.save(ns['MyBackbone']().state_dict(), {str(weights)!r})")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", save], env=env, check=True, timeout=300, cwd=tmp_path)
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(argv)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: v["code"] for k, v in res.items()} == {k: 0 for k in argv}, proc.stderr[-3000:]

    assert re.search(r"^MyBackbone\s", res["list"]["stdout"], re.M)
    recs = {p.parent.name: read_record(p) for p in (tmp_path / "probe" / "MyBackbone").rglob("seed0.json")}
    assert sorted(recs) == ["seg"]
    assert recs["seg"]["model"]["weights"].startswith("random")
    (wrec,) = [read_record(p) for p in (tmp_path / "weights" / "MyBackbone").rglob("seg/seed0.json")]
    # a record names its weights by file name and hash, never by the author's absolute path
    assert wrec["model"]["weights"] == weights.name
    assert str(weights) not in json.dumps([wrec["model"], wrec["config"]])
    assert len(wrec["config"]["backbone"]["weights_sha256"]) == 64

    names = {p.parts[len(board.parts) + 1] for p in (board / "results").rglob("seed0.json")}
    assert names == {"floor", "gt-oracle", "pixels", "MyBackbone"}
    assert "MyBackbone" in (board / "site" / "index.html").read_text(encoding="utf-8")
    pairs = {(c["a"], c["b"]) for c in json.loads((board / "comparisons.json").read_text())["comparisons"]}
    assert {("MyBackbone", "floor"), ("MyBackbone", "pixels")} <= pairs
