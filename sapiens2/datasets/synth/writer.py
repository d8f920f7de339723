"""Write synthetic splits in the reader formats, atomically, and cache the embedded default split.

Two generators: ``procedural`` (the embedded ray-cast people, the default) and ``realistic`` (anny
bodies rendered by Mitsuba, the optional ``realistic`` extra; see :mod:`.realistic`). A split's
``split.json`` names the generator and its settings; the cache key includes them.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from sapiens2.datasets.derive import ground_truth_writers, manifest, synth_scene, write_scene
from sapiens2.errors import UnknownNameError
from sapiens2.reference import keypoints308
from sapiens2.utils_io import default_mode, write_json_atomic

from .atomic import SplitExistsError, _move_into_place, _replaceable
from .realistic import sample as realistic_samples
from .realistic.sample import THREADS_ENV, RealisticSettings, prepare
from .realistic.variant import choose_variant
from .scene import synth_sample

GENERATOR_VERSION = 1  # bump when the renderer's output changes, so cached splits are remade
REALISTIC_VERSION = 3  # the same for the realistic generator (2: occluders; 3: keypoint visibility, COCO-17)
GENERATORS = ("procedural", "realistic")
# bump when the manifests' layout changes (not the rendered files): cached splits are remade, so a
# split's content hash never depends on when its cache was filled. 2: manifests name their vocabulary.
MANIFEST_VERSION = 2
# The vocabulary each manifest names, as imported splits do (sapiens2.datasets.importers)
VOCABULARIES = {"pose": ("keypoint_set", "keypoints308"), "seg": ("label_set", "sapiens2_29")}


def _dense_records(sid: str, r: dict) -> dict[str, dict]:
    """Each rendered dense task's manifest record of scene ``sid`` (its files: :func:`_render_and_write`)."""
    img, mask = f"images/{sid}.png", f"mask/{sid}.png"
    return {
        "seg": {"id": sid, "image": img, "label": f"seg/{sid}.png"},
        "normal": {"id": sid, "image": img, "normal": f"normal/{sid}.npy", "mask": mask},
        "pointmap": {"id": sid, "image": img, "pointmap": f"pointmap/{sid}.npy", "mask": mask, "K": r["K"]},
        "albedo": {"id": sid, "image": img, "albedo": f"albedo/{sid}.png", "mask": mask},
    }


# The tasks the renderer has ground truth for (pose: the COCO file), each with its manifest; every
# one is a task of the task table (tests/sapiens2/datasets/synth/test_synth.py). A task of the table
# not rendered here has no ground truth in a synthetic split, and the probe says so when asked for it.
_DENSE_TASKS = tuple(_dense_records("", {"K": None}))
RENDERED_TASKS = ("pose", *_DENSE_TASKS)
TASK_MANIFESTS = {t: f"{t}.json" for t in RENDERED_TASKS}


def _save_png(path: Path, arr: np.ndarray) -> None:
    from PIL import Image

    Image.fromarray(arr).save(path, compress_level=1)


def resolve_generator(generator=None):
    """None for the procedural generator, else the realistic generator's settings.

    Args:
        generator: None / ``"procedural"``, ``"realistic"`` (default settings), or a
            ``RealisticSettings``.

    Raises:
        UnknownNameError: an unknown generator name (names the ``--generator`` flag).
    """
    if generator is None or generator == "procedural":
        return None
    if isinstance(generator, str):
        if generator != "realistic":
            raise UnknownNameError("synthetic generator (--generator)", generator, GENERATORS)

        return RealisticSettings()
    return generator


def _render_and_write(args: tuple) -> dict:
    root, seed, index, hw, realistic = args
    if realistic is None:
        s = synth_sample(seed, index, hw)
    else:
        s = realistic_samples.realistic_sample(seed, index, hw, realistic)
    sid = f"{index:06d}"
    root = Path(root)
    _save_png(root / "images" / f"{sid}.png", s["image"])
    _save_png(root / "seg" / f"{sid}.png", s["label"])
    _save_png(root / "mask" / f"{sid}.png", (s["mask"] * 255).astype(np.uint8))
    _save_png(root / "albedo" / f"{sid}.png", s["albedo"])
    np.save(root / "normal" / f"{sid}.npy", s["normal"])
    np.save(root / "pointmap" / f"{sid}.npy", s["pointmap"])
    # the tasks that write their own ground truth from the scene (TaskSpec.write_ground_truth)
    derived = write_scene(synth_scene(s, sid), root, ground_truth_writers(skip=RENDERED_TASKS))
    return {
        "id": sid,
        "derived": derived,
        "K": s["K"].tolist(),
        "people": [
            {"keypoints": p["keypoints"].tolist(), "bbox": p["bbox"], "area": p["area"]} for p in s["people"]
        ],
    }


def _coco(results: list[dict], hw: tuple[int, int]) -> dict:
    kp = keypoints308()
    images, anns = [], []
    for i, r in enumerate(results):
        images.append({"id": i, "file_name": f"images/{r['id']}.png", "height": hw[0], "width": hw[1]})
        for p in r["people"]:
            k = np.asarray(p["keypoints"])
            flat = np.round(k, 3).reshape(-1).tolist()
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i,
                    "category_id": 1,
                    "bbox": p["bbox"],
                    "area": float(p["area"]),
                    "iscrowd": 0,
                    "num_keypoints": int((k[:, 2] > 0).sum()),
                    "keypoints": flat,
                }
            )
    names = [k["name"] for k in kp["keypoints"]]
    links = [[a + 1, b + 1] for a, b in (s["link"] for s in kp["skeleton"])]
    kind, vocab = VOCABULARIES["pose"]
    return {
        kind: vocab,
        "info": {"description": "sapiens2-bench synthetic people", "version": GENERATOR_VERSION},
        "images": images,
        "annotations": anns,
        "categories": [
            {"id": 1, "name": "person", "supercategory": "person", "keypoints": names, "skeleton": links}
        ],
    }


def generate_split(
    out: str | os.PathLike,
    n: int,
    seed: int = 0,
    size: tuple[int, int] = (256, 192),
    workers: int = 1,
    progress: bool = True,
    overwrite: bool = False,
    generator=None,
) -> Path:
    """Render ``n`` scenes and write all five tasks' ground truth under ``out``, and that of every
    registered task with a ground-truth writer (``TaskSpec.write_ground_truth``,
    :mod:`sapiens2.datasets.derive`).

    The split is written to a temporary folder next to ``out`` and renamed into place at the end,
    so ``out`` either does not exist or is complete. Nothing this call did not create is deleted:
    without ``overwrite``, a folder that appears at ``out`` while rendering (another run's split)
    makes this call fail and is left alone; with ``overwrite`` only a previous split (or an empty
    folder) is replaced, and it is moved aside before the new split is renamed in.

    Args:
        out: destination folder (must not exist unless ``overwrite``).
        n: number of images.
        seed: split seed; image ``i`` depends only on (seed, i) and ``size``.
        size: (H, W) in pixels.
        workers: processes used to render.
        progress: show a progress bar.
        overwrite: replace an existing split at ``out``.
        generator: None / ``"procedural"``, ``"realistic"`` or a ``RealisticSettings``
            (:func:`resolve_generator`).

    Returns:
        The split folder.

    Raises:
        SplitExistsError: ``out`` exists (at the start, or when the split is ready) and ``overwrite``
            is off; the rendered split is discarded.
        ValueError: bad sizes, or ``overwrite`` of something that is not a split.
    """
    out = Path(out)
    h, w = check_size(n, size)
    realistic = resolve_generator(generator)
    check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        results = render_into(tmp, range(n), seed, (h, w), workers, progress, realistic, out.name)
        _write_manifests(tmp, results, (h, w), seed, out.name, generator_record(realistic))
        _move_into_place(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def check_size(n: int, size: tuple[int, int]) -> tuple[int, int]:
    """(H, W) as ints; ValueError naming ``--n`` / ``--size`` when impossible."""
    h, w = int(size[0]), int(size[1])
    if n < 1:
        raise ValueError(f"--n {n}: a synthetic split needs at least one image")
    if h < 16 or w < 16 or h > 4096 or w > 4096:
        raise ValueError(f"--size {h}x{w}: synth needs 16 <= H, W <= 4096")
    return h, w


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an existing ``out`` unless ``overwrite`` and it is a split (or an empty folder)."""
    if os.path.lexists(out):
        if not overwrite:
            raise SplitExistsError(f"{out} already exists (pass overwrite / --overwrite to replace it)")
        if not _replaceable(out):
            raise ValueError(f"{out}: not a synthetic split (no split.json) and not empty; "
                             "refusing to overwrite it")


def generator_record(realistic) -> dict:
    """What split.json says about the generator (the procedural one's entries as before)."""
    if realistic is None:
        return {"generator": "sapiens2-bench synth", "generator_version": GENERATOR_VERSION}

    return {"generator": "sapiens2-bench synth realistic", "generator_version": REALISTIC_VERSION,
            "render": {**realistic.record(), "mitsuba_variant": choose_variant(quiet=True)}}


def render_into(tmp: Path, indices, seed: int, hw: tuple[int, int], workers: int, progress: bool,
                realistic, label: str) -> list[dict]:
    """Render the scenes ``indices`` into the folder ``tmp``; their results in index order.

    The realistic generator is prepared once here (renderer check, anny's cache) and its workers
    are spawned (not forked: Mitsuba's threads do not survive a fork), each with an equal share
    of the CPU's threads.
    """
    os.chmod(tmp, default_mode(directory=True))  # mkdtemp makes it private (0700)
    for sub in ("images", "mask", *_DENSE_TASKS):  # each dense task's files in its own folder
        (tmp / sub).mkdir(exist_ok=True)
    jobs = [(str(tmp), int(seed), int(i), hw, realistic) for i in indices]
    context = None
    if realistic is not None:
        realistic.check(hw)
        prepare(progress)
        if workers > 1:
            os.environ[THREADS_ENV] = str(max(1, (os.cpu_count() or 1) // workers))
            context = multiprocessing.get_context("spawn")
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc=f"synth {label}", unit="img", disable=not progress)
    results = []
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as ex:
            for r in ex.map(_render_and_write, jobs, chunksize=1 if realistic is not None else 4):
                results.append(r)
                bar.update()
    else:
        for job in jobs:
            results.append(_render_and_write(job))
            bar.update()
    bar.close()
    return results


def _write_manifests(root: Path, results: list[dict], hw: tuple[int, int], seed: int, name: str,
                     generator: dict | None = None) -> None:
    write_json_atomic(root / "pose.json", _coco(results, hw), indent=None)
    recs: dict[str, list[dict]] = {}
    for r in results:
        for task, rec in _dense_records(r["id"], r).items():
            recs.setdefault(task, []).append(rec)
    for task, records in recs.items():
        named = dict([VOCABULARIES[task]]) if task in VOCABULARIES else {}
        write_json_atomic(
            root / TASK_MANIFESTS[task], {"task": task, "format_version": 1, **named, "records": records},
            indent=None,
        )
    derived: dict[str, list[dict]] = {}
    for r in results:
        for task, rec in r["derived"].items():
            derived.setdefault(task, []).append(rec)
    for task, records in derived.items():
        write_json_atomic(root / f"{task}.json", manifest(task, records), indent=None)
    write_json_atomic(
        root / "split.json",
        {
            "name": name,
            **(generator or generator_record(None)),
            "manifest_version": MANIFEST_VERSION,
            "seed": int(seed),
            "n": len(results),
            "size": list(hw),
            "tasks": {**TASK_MANIFESTS, **{task: f"{task}.json" for task in derived}},
            "num_people": sum(len(r["people"]) for r in results),
        },
    )


def default_cache_root() -> Path:
    """``$SAPIENS2_BENCH_CACHE/synth`` or ``~/.cache/sapiens2-bench/synth``."""
    base = os.environ.get("SAPIENS2_BENCH_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "sapiens2-bench") / "synth"


def split_key(name: str, n: int, size: tuple[int, int], seed: int, generator=None) -> str:
    """Short hash of everything that determines a synthetic split's content.

    The procedural generator's key is what it was before there were two generators (its cached
    splits stay valid); the realistic one adds its name, version and settings.
    """
    key = {
        "name": name,
        "n": int(n),
        "size": [int(size[0]), int(size[1])],
        "seed": int(seed),
        "version": GENERATOR_VERSION,
        "manifests": MANIFEST_VERSION,
    }
    derived = sorted(ground_truth_writers(skip=RENDERED_TASKS))
    if derived:  # a task writing its own ground truth makes another split (absent when none does)
        key["derived"] = derived
    realistic = resolve_generator(generator)
    if realistic is not None:
        key["generator"] = {"name": "realistic", "version": REALISTIC_VERSION, **realistic.record()}
    blob = json.dumps(key, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def ensure_default_split(
    name: str = "default",
    n: int = 64,
    size: tuple[int, int] = (256, 192),
    seed: int = 0,
    root: str | os.PathLike | None = None,
    workers: int = 1,
    progress: bool = True,
    generator=None,
) -> Path:
    """Return the cached synthetic split folder, rendering it first if absent.

    Args:
        name: split name (part of the folder name).
        n: number of images.
        size: (H, W).
        seed: split seed.
        root: cache folder (default :func:`default_cache_root`).
        workers: render processes.
        progress: show a progress bar while rendering.
        generator: as for :func:`generate_split` (part of the cache key).

    Returns:
        ``<root>/<name>-<hash>``, complete (written atomically; concurrent callers are safe).
    """
    folder = Path(root) if root is not None else default_cache_root()
    out = folder / f"{name}-{split_key(name, n, size, seed, generator)}"
    if (out / "split.json").is_file():
        return out
    try:
        generate_split(out, n=n, seed=seed, size=size, workers=workers, progress=progress,
                       generator=generator)
    except (ValueError, OSError):
        if (out / "split.json").is_file():  # another process finished first
            return out
        raise
    return out


def split_content_hash(split_dir: str | os.PathLike) -> str:
    """SHA-256 over every file of a split (relative paths and bytes), for result provenance."""
    root = Path(split_dir)
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(root)).encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()
