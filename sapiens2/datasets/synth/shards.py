"""Render one split in shards (many processes or machines), then merge them into the split.

Shard ``i/N`` renders the scenes ``i, i + N, i + 2N, ...`` of the split (interleaved, so every shard
gets a similar mix of scenes) into ``<out>.shard-<i>-of-<N>``, atomically like a split: the folder
either does not exist or holds every scene of the shard and its ``shard.json``. Merging checks that
the N shards agree (size, seed, n, generator) and cover every scene exactly once, then writes the
split as :func:`~.writer.generate_split` would have, atomically; the shards are removed afterwards.
Scene ``i`` depends only on (seed, i, size, generator), so a merged split holds the same files as
one rendered in a single run on the same machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from sapiens2.errors import BenchError
from sapiens2.utils_io import default_mode, read_json, write_json_atomic

from . import writer

SHARD_FILE = "shard.json"


class ShardError(BenchError, ValueError):
    """A bad ``--shard`` value, or shards that do not make one split."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` -> (i, N) with 0 <= i < N; :class:`ShardError` naming ``--shard`` otherwise."""
    parts = str(text).split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ShardError(f"--shard {text!r}: expected i/N with 0 <= i < N, e.g. 0/4")
    i, n = int(parts[0]), int(parts[1])
    if n < 1 or not 0 <= i < n:
        raise ShardError(f"--shard {text!r}: need N >= 1 and 0 <= i < N")
    return i, n


def shard_dir(out: str | os.PathLike, index: int, count: int) -> Path:
    """The folder of shard ``index`` of ``count`` of the split ``out``."""
    out = Path(out)
    return out.parent / f"{out.name}.shard-{index}-of-{count}"


def generate_shard(out: str | os.PathLike, n: int, shard: tuple[int, int], seed: int = 0,
                   size: tuple[int, int] = (256, 192), workers: int = 1, progress: bool = True,
                   generator=None) -> Path:
    """Render shard ``shard`` = (i, N) of the ``n``-image split ``out``; its folder.

    Raises:
        ShardError: more shards than images, or the shard folder exists already.
    """
    index, count = shard
    h, w = writer.check_size(n, size)
    if count > n:
        raise ShardError(f"--shard {index}/{count}: more shards than images (--n {n})")
    realistic = writer.resolve_generator(generator)
    target = shard_dir(out, index, count)
    if os.path.lexists(target):
        raise ShardError(f"{target} exists: shard {index}/{count} was rendered already "
                         "(remove it to render it again)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        results = writer.render_into(tmp, range(index, n, count), seed, (h, w), workers, progress, realistic,
                                     f"{Path(out).name} {index}/{count}")
        write_json_atomic(tmp / SHARD_FILE, {
            "split": Path(out).name, "n": int(n), "seed": int(seed), "size": [h, w],
            "shard": [index, count], **writer.generator_record(realistic), "results": results,
        }, indent=None)
        writer._move_into_place(tmp, target, False)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _settings(info: dict, key: str):
    """A shard's setting ``key``; the Mitsuba variant may differ between machines (only noise differs)."""
    value = info.get(key)
    if key == "render" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "mitsuba_variant"}
    return value


def _read_shards(out: Path, count: int) -> list[dict]:
    infos = []
    for i in range(count):
        folder = shard_dir(out, i, count)
        if not (folder / SHARD_FILE).is_file():
            raise ShardError(f"{folder}: shard {i}/{count} is missing (render it with --shard {i}/{count})")
        info = read_json(folder / SHARD_FILE)
        info["folder"] = folder
        infos.append(info)
    first = infos[0]
    for info in infos[1:]:
        for key in ("n", "seed", "size", "generator", "generator_version", "render"):
            if _settings(info, key) != _settings(first, key):
                raise ShardError(f"{info['folder']}: {key} {info.get(key)!r} differs from shard 0's "
                                 f"{first.get(key)!r}; the shards are not of one split")
    seen = sorted(int(r["id"]) for info in infos for r in info["results"])
    if seen != list(range(int(first["n"]))):
        raise ShardError(f"shards of {out} cover scenes {seen[:5]}..., not each of 0..{first['n'] - 1} once")
    return infos


def merge_shards(out: str | os.PathLike, count: int, overwrite: bool = False) -> Path:
    """Combine the ``count`` shards of ``out`` into the split folder ``out`` (atomically); its path.

    Raises:
        ShardError: a shard is missing, or the shards disagree or overlap.
        SplitExistsError: ``out`` exists and ``overwrite`` is off.
    """
    out = Path(out)
    if count < 1:
        raise ShardError(f"--merge-shards {count}: need at least one shard")
    infos = _read_shards(out, count)
    writer.check_out(out, overwrite)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        os.chmod(tmp, default_mode(directory=True))
        for info in infos:
            for path in info["folder"].rglob("*"):
                rel = path.relative_to(info["folder"])
                if path.is_dir() or rel.name == SHARD_FILE:
                    continue
                (tmp / rel.parent).mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, tmp / rel)
        results = sorted((r for info in infos for r in info["results"]), key=lambda r: int(r["id"]))
        first = infos[0]
        record = {k: first[k] for k in ("generator", "generator_version", "render") if k in first}
        if "render" in record:  # every variant that rendered a part of the split
            variants = sorted({info["render"].get("mitsuba_variant", "") for info in infos})
            record["render"] = {**record["render"], "mitsuba_variant": ",".join(variants)}
        writer._write_manifests(tmp, results, tuple(first["size"]), int(first["seed"]), out.name, record)
        writer._move_into_place(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for info in infos:
        shutil.rmtree(info["folder"], ignore_errors=True)
    return out
