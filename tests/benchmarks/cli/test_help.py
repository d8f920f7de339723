"""CLI polish: an example in every (sub)command's --help that the real parser accepts, no literal
``%%``, "did you mean" on near-miss names, and ``download --dry-run`` listing its targets offline."""

from __future__ import annotations

import shlex
import socket

import pytest

from benchmarks.cli.examples import EXAMPLES
from benchmarks.cli.main import _all_parsers, build_parser, main
from sapiens2.errors import UnknownNameError, close_names


def _parsers():
    root = build_parser()
    return root, {p.prog.removeprefix(root.prog).strip(): p for p in _all_parsers(root)}


def test_every_command_help_has_an_example_and_no_double_percent():
    _, parsers = _parsers()
    assert len(parsers) > 20
    for path, p in parsers.items():
        text = p.format_help()
        assert "example" in text.lower(), f"`sapiens2-bench {path} --help` shows no example"
        assert "%%" not in text, f"`sapiens2-bench {path} --help` prints a literal %%"
    assert set(EXAMPLES) == set(parsers), "an example for a command that does not exist, or one missing"


def test_every_example_parses_with_the_real_parser():
    root, _ = _parsers()
    for path, lines in EXAMPLES.items():
        for line in lines:
            argv = shlex.split(line)
            argv = argv[argv.index("sapiens2-bench") + 1:]
            assert argv[: len(path.split())] == path.split() or path == "", (path, line)
            try:
                root.parse_args(argv)
            except SystemExit as e:  # argparse rejected it (an unknown option or a bad value)
                pytest.fail(f"example of {path!r} does not parse: {line} (exit {e.code})")


def test_close_names_fold_separators_and_case():
    known = ["dinov2_small", "dinov2_base", "sapiens2_0.4b", "pixels"]
    assert close_names("dinov2-small", known) == ["dinov2_small"]
    assert close_names("SAPIENS2-0.4B", known) == ["sapiens2_0.4b"]
    assert close_names("dinov2_smal", known)[0] == "dinov2_small"
    assert close_names("resnet50", known) == []


def test_unknown_name_error_says_did_you_mean_only_when_close():
    e = UnknownNameError("probe backbone", "dinov2-small", ["dinov2_small", "pixels"])
    assert str(e) == ("unknown probe backbone 'dinov2-small'; did you mean 'dinov2_small'? "
                      "known: dinov2_small, pixels")
    assert e.suggestions == ["dinov2_small"]
    far = UnknownNameError("task", "depth", ["pose", "seg"])
    assert str(far) == "unknown task 'depth'; known: pose, seg" and far.suggestions == []


def test_cli_near_miss_backbone_gets_did_you_mean(tmp_path, capsys):
    code = main(["probe", "--backbone", "dinov2-small", "--tasks", "seg", "--data", str(tmp_path / "none"),
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "did you mean 'dinov2_small'?" in err, err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.hf
@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable"])
def test_download_dry_run_lists_targets_offline(tmp_path, monkeypatch, capsys, how):
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    if how == "HF_HUB_OFFLINE":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    root = tmp_path / "ckpts"
    code = main(["download", "--tasks", "seg,pose", "--sizes", "0.4b", "--pretrain", "--checkpoint-root",
                 str(root), "--cache-dir", str(tmp_path / "cache"), "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0, out
    for target in ("seg/sapiens2_0.4b_seg.safetensors", "pose/sapiens2_0.4b_pose.safetensors",
                   "pretrain/sapiens2_0.4b_pretrain.safetensors"):
        assert f"would fetch its checkpoint (file name resolved online) -> {root / target}" in out, out
    assert "3 of 3 listed" in out and not root.exists()
    # without --dry-run the same offline request still fails clearly
    assert main(["download", "--tasks", "seg", "--sizes", "0.4b", "--checkpoint-root", str(root),
                 "--cache-dir", str(tmp_path / "cache")]) == 1
