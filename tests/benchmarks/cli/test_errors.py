"""How the console command fails (issue 13, items 14, 15, 17): one message naming the path and a
non-zero exit for every expected failure, tracebacks only with ``--debug`` or for bugs (with a hint),
``--device`` checked once for every command, and commands that cannot split their work refused
under torchrun."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from benchmarks.cli import main as cli_main
from benchmarks.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


# ------------------------------------------------------------------------------------ inputs
def _seg_pair(root: Path) -> Path:
    """Two tiny seg prediction/GT PNG pairs under ROOT/pred and ROOT/gt."""
    rng = np.random.default_rng(0)
    for d in ("pred", "gt"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for i in range(2):
        lab = rng.integers(0, 29, (8, 6)).astype(np.uint8)
        cv2.imwrite(str(root / "gt" / f"{i}.png"), lab)
        cv2.imwrite(str(root / "pred" / f"{i}.png"), lab)
    return root


def _golden(root: Path) -> Path:
    """A golden folder with one case of an unknown kind: parity fails it but still writes --json."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({"cases": [{"name": "x", "kind": "mystery"}]}))
    return root


def _argv(command: str, tmp_path: Path, out: Path) -> list[str]:
    """A command line of ``command`` that writes its output to ``out``."""
    if command == "data synth":
        return ["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "1",
                "--size", "64x48"]
    if command == "eval seg":
        seg = _seg_pair(tmp_path / "seg")
        return ["eval", "seg", "--pred", str(seg / "pred"), "--gt", str(seg / "gt"), "--json", str(out)]
    if command == "parity":
        return ["parity", str(_golden(tmp_path / "golden")), "--json", str(out)]
    raise AssertionError(command)


WRITERS = ["data synth", "eval seg", "parity"]


def _one_error_line(err: str, command: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("sapiens2-bench")]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith(f"sapiens2-bench {command}: error: "), err
    return lines[0]


# --------------------------------------------------------------------- 14: expected failures
@pytest.mark.parametrize("command", WRITERS)
def test_output_below_an_existing_file_is_one_message(tmp_path, capsys, command):
    """The output's parent is a file: old code ended in a FileExistsError/NotADirectoryError traceback."""
    blocker = tmp_path / "blocker.txt"
    blocker.write_text("a file, not a folder\n")
    code = main(_argv(command, tmp_path, blocker / "out.json"))
    line = _one_error_line(capsys.readouterr().err, command)
    assert code == 1 and str(blocker) in line
    assert blocker.read_text() == "a file, not a folder\n"


@pytest.mark.parametrize("command", ["eval seg", "parity"])
def test_json_output_that_is_an_existing_folder_is_one_message(tmp_path, capsys, command):
    folder = tmp_path / "taken"
    (folder / "keep").mkdir(parents=True)
    code = main(_argv(command, tmp_path, folder))
    line = _one_error_line(capsys.readouterr().err, command)
    assert code == 1 and str(folder) in line and "directory" in line.lower()
    assert (folder / "keep").is_dir()


def _without_dac_override() -> None:  # pragma: no cover - runs in the child before exec
    """Drop CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2) from the bounding set: after exec,
    root obeys file modes like any user (PR_CAPBSET_DROP = 24)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _cli_obeying_file_modes(argv: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI in a child process for which a folder's mode bits deny writes (also under root)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kw = {"preexec_fn": _without_dac_override} if os.geteuid() == 0 else {}
    try:
        return subprocess.run([sys.executable, "-m", "benchmarks.cli.main", *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, **kw)
    except subprocess.SubprocessError as e:
        if "prctl" in str(e):
            pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE, so no folder is read-only: {e}")
        raise


@pytest.mark.parametrize("command", WRITERS)
def test_read_only_output_folder_is_one_message(tmp_path, command):
    """A folder the user may not write to (mode 0555): a message naming the path, exit 1."""
    ro = tmp_path / "read_only"
    ro.mkdir()
    argv = _argv(command, tmp_path, ro / "out")
    ro.chmod(0o555)
    try:
        res = _cli_obeying_file_modes(argv)
    finally:
        ro.chmod(0o755)
    line = _one_error_line(res.stderr, command)
    assert res.returncode == 1 and "Permission denied" in line and str(ro) in line, res.stderr
    assert list(ro.iterdir()) == []


@pytest.mark.parametrize("where", ["before", "after", "between"])
def test_debug_before_or_after_the_subcommand_shows_the_traceback(tmp_path, where):
    blocker = tmp_path / "blocker.txt"
    blocker.write_text("x")
    argv = _argv("data synth", tmp_path, blocker / "split")
    argv = {"before": ["--debug", *argv], "after": [*argv, "--debug"],
            "between": ["data", "--debug", *argv[1:]]}[where]
    with pytest.raises(OSError) as err:
        main(argv)
    assert str(blocker) in str(err.value)


def test_debug_flag_of_a_subcommand_still_reaches_it(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("benchmarks.cli.parity.run", lambda args: seen.append(args.debug) or 0)
    golden = str(_golden(tmp_path / "g"))
    assert main(["parity", golden]) == 0 and main(["parity", golden, "--debug"]) == 0
    assert main(["--debug", "parity", golden]) == 0
    assert seen == [False, True, True]


@pytest.mark.parametrize("exc", [
    PermissionError(13, "Permission denied", "/srv/results/run.json"),
    OSError(30, "Read-only file system", "/mnt/ro/split"),
    IsADirectoryError(21, "Is a directory", "/tmp/x.tmp", None, "/tmp/out.json"),
])
def test_any_oserror_is_one_message_naming_its_path(monkeypatch, capsys, tmp_path, exc):
    def fail(args):
        raise exc

    monkeypatch.setattr("benchmarks.cli.parity.run", fail)
    assert main(["parity", str(tmp_path)]) == 1
    line = _one_error_line(capsys.readouterr().err, "parity")
    assert exc.filename in line and exc.strerror in line
    if exc.filename2:
        assert exc.filename2 in line


def test_unexpected_errors_keep_their_traceback_with_a_hint(monkeypatch, capsys, tmp_path):
    """A bug is not an input error: its traceback stays, followed by a one-line hint."""

    def buggy(args):
        return 1 / 0

    monkeypatch.setattr("benchmarks.cli.parity.run", buggy)
    assert main(["parity", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("sapiens2-bench parity: unexpected error") and "bug" in last
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "parity", str(tmp_path)])


# --------------------------------------------------------------------------------- 15: --device
def _device_commands() -> list[list[str]]:
    """Every (sub)command path whose parser has a --device option."""
    found = []

    def walk(parser, path):
        sub = cli_main._subparsers(parser)
        if sub is None:
            if "--device" in parser._option_string_actions:
                found.append(path)
            return
        for name, child in sub.choices.items():
            walk(child, [*path, name])

    walk(cli_main.build_parser(), [])
    return found


def _required_args(parser) -> list[str]:
    """Placeholder values for a leaf parser's required options and positionals."""
    out = []
    for a in parser._actions:
        if a.option_strings and not a.required:
            continue
        value = str(a.choices[0]) if a.choices else "x"
        out += [a.option_strings[0], value] if a.option_strings else [value]
    return out


def _leaf(parser, path):
    for name in path:
        parser = cli_main._subparsers(parser).choices[name]
    return parser


def _recording(path, seen, what):
    """A ``build_parser`` whose ``path`` command records ``what(args)`` instead of running."""
    real_build = cli_main.build_parser

    def build(commands=None):
        parser = real_build(commands)
        _leaf(parser, path).set_defaults(func=lambda args: seen.append(what(args)) or 0)
        return parser

    return build


def test_every_device_command_is_found():
    assert {" ".join(c) for c in _device_commands()} >= {"run", "probe", "reproduce", "eval seg"}


@pytest.mark.parametrize("path", _device_commands(), ids=lambda p: " ".join(p))
def test_every_device_option_is_resolved_before_the_command_runs(monkeypatch, capsys, path):
    """--device cuda without CUDA is one message; auto becomes the CPU (old code passed both through)."""
    seen = []
    monkeypatch.setattr(cli_main, "build_parser", _recording(path, seen, lambda args: args.device))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = [*path, *_required_args(_leaf(cli_main.build_parser(), path))]
    assert main([*argv, "--device", "cuda"]) == 1
    line = _one_error_line(capsys.readouterr().err, " ".join(path))
    assert "--device cuda" in line and "CUDA" in line
    assert main([*argv, "--device", "auto"]) == 0 and main([*argv, "--device", "cpu"]) == 0
    assert seen == ["cpu", "cpu"]


def test_eval_on_cuda_without_cuda_is_one_message(tmp_path, capsys, monkeypatch):
    """The real command (old code: AssertionError 'Torch not compiled with CUDA enabled' traceback)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = _argv("eval seg", tmp_path, tmp_path / "m.json")
    assert main([*argv, "--device", "cuda"]) == 1
    assert "CUDA" in _one_error_line(capsys.readouterr().err, "eval seg")
    assert not (tmp_path / "m.json").exists()
    assert main([*argv, "--device", "auto"]) == 0 and (tmp_path / "m.json").is_file()


def test_resolve_device(monkeypatch):
    from sapiens2.device import DeviceUnavailableError, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device(None) == resolve_device("cpu") == "cpu"
    for bad in ("cuda", "cuda:0"):
        with pytest.raises(DeviceUnavailableError, match=f"--device {bad}"):
            resolve_device(bad)
    with pytest.raises(DeviceUnavailableError, match="unknown device 'gpu0'"):
        resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda") == "cuda"
    assert resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceUnavailableError, match=r"only 2 CUDA device\(s\)"):
        resolve_device("cuda:2")


# ----------------------------------------------------------------------------- 17: torchrun
def test_commands_that_do_not_split_work_refuse_torchrun(tmp_path, capsys, monkeypatch):
    """Under torchrun (RANK/WORLD_SIZE set) eval and data synth used to run fully in every worker."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    for command, out in (("eval seg", tmp_path / "m.json"), ("data synth", tmp_path / "split")):
        assert main(_argv(command, tmp_path, out)) == 1
        line = _one_error_line(capsys.readouterr().err, command)
        assert "WORLD_SIZE=2" in line and "probe" in line
        assert not out.exists()
    monkeypatch.setenv("WORLD_SIZE", "1")  # one worker: nothing to refuse
    assert main(_argv("eval seg", tmp_path, tmp_path / "m.json")) == 0 and (tmp_path / "m.json").is_file()


def _first_leaf(name: str) -> list[str]:
    """``name`` followed by its first subcommand(s), down to a parser that runs something."""
    path, p = [name], _leaf(cli_main.build_parser(), [name])
    while (sub := cli_main._subparsers(p)) is not None:
        path.append(next(iter(sub.choices)))
        p = sub.choices[path[-1]]
    return path


def test_every_command_but_the_distributed_ones_refuses_torchrun(monkeypatch, capsys):
    names = list(cli_main._subparsers(cli_main.build_parser()).choices)
    assert "probe" in names and len(names) > 5
    ran = []
    for name in names:
        path = _first_leaf(name)
        argv = [*path, *_required_args(_leaf(cli_main.build_parser(), path))]
        with monkeypatch.context() as m:
            m.setenv("RANK", "1")
            m.setenv("WORLD_SIZE", "4")
            m.setattr(cli_main, "build_parser", _recording(path, ran, lambda args: args.command))
            code = main(argv)
        err = capsys.readouterr().err
        if name in cli_main.DISTRIBUTED_COMMANDS:
            assert code == 0, err
        else:
            assert code == 1 and "WORLD_SIZE=4" in err, (name, err)
    assert ran == list(cli_main.DISTRIBUTED_COMMANDS)
