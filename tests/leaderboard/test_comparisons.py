"""Paired comparisons are trusted only when they check out: a sealed comparison made from the records being
built (``leaderboard build --comparisons``, repeatable), and a record value consistent with its side file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cli.main import main  # noqa: E402
from benchmarks.probe.records.compare import paired_comparisons  # noqa: E402
from leaderboard.comparisons import COMPARISON_HASH_FIELD, comparison_hash  # noqa: E402
from sapiens2.records.results import make_record, read_record, write_record  # noqa: E402
from tests.benchmarks.probe.test_compare import N, seg_items, write_seg_record  # noqa: E402

RESERVED = {"record_hash", "config_hash", "run_id", "created_utc", "schema", "schema_version", "schema_minor",
            "provenance", "device"}


def _records(root: Path, names=("good", "good-random"), seeds=(11, 0)) -> Path:
    for name, seed in zip(names, seeds):
        write_seg_record(root, name, seg_items(N, seed))
    return root


def _compare_json(root: Path, a: str, b: str, path: Path) -> Path:
    path.write_text(json.dumps({"comparisons": paired_comparisons(root, a, b)}))
    return path


def _build(results, site, *cmp_files) -> int:
    argv = ["leaderboard", "build", str(results), "--out", str(site), "--no-figures"]
    for f in cmp_files:
        argv += ["--comparisons", str(f)]
    return main(argv)


def test_comparisons_of_other_records_are_refused(tmp_path, capsys):
    ours = _records(tmp_path / "ours")
    theirs = _records(tmp_path / "theirs", names=("x", "y"))
    cmp_file = _compare_json(theirs, "x", "y", tmp_path / "theirs.json")
    assert _build(ours, tmp_path / "site", cmp_file) == 1
    assert "is not among the records being built" in capsys.readouterr().err


def test_a_hand_edited_verdict_is_refused(tmp_path, capsys):
    root = _records(tmp_path / "r")
    cmp_file = _compare_json(root, "good", "good-random", tmp_path / "c.json")
    assert _build(root, tmp_path / "site", cmp_file) == 0
    saved = json.loads(cmp_file.read_text())
    saved["comparisons"][0]["verdict"] = "good-random better beyond the 95% interval"
    cmp_file.write_text(json.dumps(saved))
    assert _build(root, tmp_path / "site2", cmp_file) == 1
    assert f"do not match its {COMPARISON_HASH_FIELD}" in capsys.readouterr().err


def test_comparisons_may_be_given_more_than_once(tmp_path):
    root = _records(tmp_path / "r", names=("a", "b"), seeds=(11, 0))
    write_seg_record(root, "c", seg_items(N, 5))
    first = _compare_json(root, "a", "b", tmp_path / "ab.json")
    second = _compare_json(root, "a", "c", tmp_path / "ac.json")
    assert _build(root, tmp_path / "site", first, second, first) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    for f in (first, second):
        (c,) = json.loads(f.read_text())["comparisons"]
        assert c["display"]["difference"] in page


def test_the_seal_covers_the_numbers_and_the_record_hashes(tmp_path):
    root = _records(tmp_path / "r")
    (c,) = paired_comparisons(root, "good", "good-random")
    a = read_record(root / "good" / "test-paired-v1" / "seg" / "seed0.json")
    assert c["record_hash_a"] == a["record_hash"] and c[COMPARISON_HASH_FIELD] == comparison_hash(c)
    assert comparison_hash({**c, "difference": c["difference"] + 1}) != c[COMPARISON_HASH_FIELD]


def test_an_edited_and_rehashed_headline_is_refused_by_compare(tmp_path, capsys):
    root = _records(tmp_path / "r", names=("x", "y"), seeds=(0, 0))
    path = root / "x" / "test-paired-v1" / "seg" / "seed0.json"
    rec = read_record(path)
    metrics = {**rec["metrics"], "mIoU": rec["metrics"]["mIoU"] - 35.2}
    kwargs = {k: v for k, v in rec.items() if k not in RESERVED and k != "metrics"}
    write_record(path, make_record(**kwargs, metrics=metrics, command=rec["provenance"]["command"]))
    with pytest.raises(ValueError, match=r"lies outside .* the range of its own resampled values"):
        paired_comparisons(root, "x", "y")
    assert main(["compare", str(root), "x", "y"]) == 1
    assert "resampled values" in capsys.readouterr().err
