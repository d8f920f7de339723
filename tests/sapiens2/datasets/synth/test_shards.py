"""A split rendered in shards (--shard i/N, then --merge-shards N) equals one rendered in one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sapiens2.datasets.synth import generate_split
from sapiens2.datasets.synth.shards import ShardError, generate_shard, merge_shards, parse_shard, shard_dir

HW = (48, 32)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_merged_shards_hold_the_same_files_as_one_run(tmp_path):
    one = generate_split(tmp_path / "one" / "s", n=5, seed=4, size=HW, progress=False)
    out = tmp_path / "sharded" / "s"
    for i in range(3):
        folder = generate_shard(out, 5, (i, 3), seed=4, size=HW, progress=False)
        assert folder == shard_dir(out, i, 3) and not out.exists()
        names = sorted(p.name for p in (folder / "images").iterdir())
        assert names == [f"{k:06d}.png" for k in range(i, 5, 3)]
    merge_shards(out, 3)
    assert _files(out) == _files(one)
    assert sorted(p.name for p in out.parent.iterdir()) == ["s"], "the shards are removed after the merge"


def test_shard_errors_name_the_problem(tmp_path):
    out = tmp_path / "s"
    for bad in ("1", "2/2", "a/b", "-1/3"):
        with pytest.raises(ShardError, match="--shard"):
            parse_shard(bad)
    assert parse_shard("1/4") == (1, 4)
    with pytest.raises(ShardError, match="more shards than images"):
        generate_shard(out, 2, (0, 3), size=HW, progress=False)
    generate_shard(out, 4, (0, 2), seed=1, size=HW, progress=False)
    with pytest.raises(ShardError, match="rendered already"):
        generate_shard(out, 4, (0, 2), seed=1, size=HW, progress=False)
    with pytest.raises(ShardError, match="shard 1/2 is missing"):
        merge_shards(out, 2)
    generate_shard(out, 4, (1, 2), seed=2, size=HW, progress=False)  # another seed: not the same split
    with pytest.raises(ShardError, match="seed"):
        merge_shards(out, 2)
    assert not out.exists() and len(list(tmp_path.iterdir())) == 2, "a refused merge leaves the shards alone"


def test_cli_shards_and_merge(tmp_path, capsys):
    from benchmarks.cli.main import main

    out = tmp_path / "s"
    for i in range(2):
        args = ["data", "synth", "--generator", "procedural", "--out", str(out), "--n", "3",
                "--size", "48x32", "--shard", f"{i}/2"]
        assert main(args) == 0
    assert main(["data", "synth", "--out", str(out), "--merge-shards", "2"]) == 0
    info = json.loads((out / "split.json").read_text())
    assert info["n"] == 3 and info["generator"] == "sapiens2-bench synth"
    assert main(["data", "synth", "--generator", "procedural", "--out", str(tmp_path / "x"), "--n", "1",
                 "--spp", "8"]) != 0
    assert "--spp applies to --generator realistic only" in capsys.readouterr().err
