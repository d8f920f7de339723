"""Unlabelled synthetic pretraining images: a recipe's ``data`` section rendered once and cached.

A recipe may name its data instead of taking ``--data DIR``::

    "data": {"source": "synth", "seed": 1000, "n": 6000, "size": [256, 192]}

Image ``i`` is scene ``i`` of the synthetic generator with that seed (``synth_sample(seed, i)``,
seeded by ``SeedSequence([seed, i])``), so a pretraining split whose seed differs from the probe
splits' seed shares no scene with them. Only the images are written (no labels), as PNG under
``<cache>/unlabelled-<key>/images``, with ``unlabelled.json`` describing them; the folder appears
atomically (rendered to a temporary folder, then renamed), so concurrent callers are safe.

Example:
    >>> spec = check_data_spec({"source": "synth", "seed": 1000, "n": 8, "size": [64, 48]})
    >>> spec["seed"], len(data_key(spec))
    (1000, 12)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sapiens2.datasets.synth import GENERATOR_VERSION, default_cache_root, synth_sample
from sapiens2.errors import BenchError
from sapiens2.utils_io import write_json_atomic

MANIFEST = "unlabelled.json"
_KEYS = ("source", "seed", "n", "size")


def check_data_spec(spec: dict) -> dict:
    """Validate a config's ``data`` section.

    Returns:
        The spec with plain types (``size`` a list).

    Raises:
        BenchError: unknown or missing keys, another source, bad numbers (names the key).
    """
    if not isinstance(spec, dict):
        raise BenchError(f"pretraining config: data must be a dict or null, got {spec!r}")
    unknown = sorted(set(spec) - set(_KEYS))
    missing = [k for k in _KEYS if k not in spec]
    if unknown or missing:
        raise BenchError(f"pretraining config: data: unknown keys {unknown}, missing keys {missing}; "
                         f"expected {', '.join(_KEYS)}")
    if spec["source"] != "synth":
        raise BenchError(f"pretraining config: data.source must be 'synth', got {spec['source']!r}")
    for key, low in (("seed", 0), ("n", 1)):
        v = spec[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise BenchError(f"pretraining config: data.{key} must be an int >= {low}, got {v!r}")
    size = spec["size"]
    if not (isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(s, int) for s in size)
            and 16 <= min(size) and max(size) <= 4096):
        raise BenchError(f"pretraining config: data.size must be [H, W], 16 <= H, W <= 4096, got {size!r}")
    return {"source": "synth", "seed": spec["seed"], "n": spec["n"], "size": [int(size[0]), int(size[1])]}


def data_key(spec: dict) -> str:
    """12 hex digits naming everything that determines the images (spec and generator version)."""
    blob = json.dumps({**check_data_spec(spec), "version": GENERATOR_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _render_one(args: tuple) -> None:
    from PIL import Image

    folder, seed, index, hw = args
    Image.fromarray(synth_sample(seed, index, hw)["image"]).save(
        Path(folder) / f"{index:06d}.png", compress_level=1)


def render_unlabelled(out: str | os.PathLike, spec: dict, workers: int = 1, progress: bool = True) -> Path:
    """Render the images of ``spec`` into ``out/images`` (``out`` must not exist).

    Args:
        out: destination folder.
        spec: a ``data`` section (see the module docstring).
        workers: render processes.
        progress: show a progress bar.

    Returns:
        ``out``.

    Raises:
        BenchError: ``out`` exists.
    """
    from tqdm import tqdm

    spec = check_data_spec(spec)
    out = Path(out)
    if os.path.lexists(out):
        raise BenchError(f"{out} already exists; not rendering over it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "images").mkdir()
        hw = tuple(spec["size"])
        jobs = [(str(tmp / "images"), spec["seed"], i, hw) for i in range(spec["n"])]
        bar = tqdm(total=len(jobs), desc=f"render {out.name}", unit="img", disable=not progress)
        if workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as ex:
                for _ in ex.map(_render_one, jobs, chunksize=16):
                    bar.update()
        else:
            for job in jobs:
                _render_one(job)
                bar.update()
        bar.close()
        write_json_atomic(tmp / MANIFEST, {"generator": "sapiens2-bench synth (images only, unlabelled)",
                                           "generator_version": GENERATOR_VERSION, **spec})
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def ensure_unlabelled(spec: dict, root: str | os.PathLike | None = None, workers: int = 1,
                      progress: bool = True) -> Path:
    """The cached folder of ``spec``'s images, rendered first when absent.

    Args:
        spec: a ``data`` section.
        root: cache folder (default: the synthetic splits' cache, ``$SAPIENS2_BENCH_CACHE/synth``).
        workers: render processes.
        progress: show a progress bar while rendering.

    Returns:
        ``<root>/unlabelled-<key>`` (complete).
    """
    folder = Path(root) if root is not None else default_cache_root()
    out = folder / f"unlabelled-{data_key(spec)}"
    if (out / MANIFEST).is_file():
        return out
    try:
        return render_unlabelled(out, spec, workers=workers, progress=progress)
    except (BenchError, OSError):
        if (out / MANIFEST).is_file():  # another process finished first
            return out
        raise
