"""One realistic sample with the procedural ``synth_sample``'s keys, and the one-time preparation.

:func:`realistic_sample` is what the split writer calls per image; :func:`prepare` runs once per
split in the writer's main process (the Mitsuba variant check and anny's model cache, with a
progress line), so neither happens inside a worker or a test's timed part.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from sapiens2.errors import BenchError

from . import scene as scene_module
from .bodies import anny_model, anny_problem
from .mixes import SCENE_MIXES, SCENES
from .people import sample_people
from .render import render_all
from .variant import choose_variant, load_mitsuba, require_mitsuba

THREADS_ENV = "SAPIENS2_RENDER_THREADS"  # render threads per process (the writer sets it per worker)
MODES = ("fast", "path")
MAX_PEOPLE = 4
MAX_SPP = 4096
MIN_SIDE = 16
_STREAM = 0x5EA1  # keeps the realistic and the procedural streams of one (seed, index) apart


class RealisticSettingError(BenchError, ValueError):
    """An impossible setting of the realistic generator (the message names the flag)."""


@dataclass(frozen=True)
class RealisticSettings:
    """How realistic scenes are rendered.

    Attributes:
        mode: ``fast`` (direct lighting, 4 samples: CI-sized splits) or ``path`` (path tracing).
        spp: samples per pixel of ``path``.
        max_people: each image holds 1..max_people people.
        scenes: ``default``, ``photo`` or ``simple`` (see :data:`SCENES`).
    """

    mode: str = "fast"
    spp: int = 64
    max_people: int = 2
    scenes: str = "default"

    def check(self, hw: tuple[int, int] | None = None) -> None:
        """Raise :class:`RealisticSettingError` naming the flag of an impossible setting."""
        if self.mode not in MODES:
            raise RealisticSettingError(f"--render {self.mode!r}: expected one of {', '.join(MODES)}")
        if not 1 <= int(self.spp) <= MAX_SPP:
            raise RealisticSettingError(f"--spp {self.spp}: samples per pixel must be 1..{MAX_SPP}")
        if not 1 <= int(self.max_people) <= MAX_PEOPLE:
            raise RealisticSettingError(f"--people {self.max_people}: people per image must be "
                                        f"1..{MAX_PEOPLE}")
        if self.scenes not in SCENES:
            raise RealisticSettingError(f"--scenes {self.scenes!r}: expected one of {', '.join(SCENES)}")
        if hw is not None and min(hw) < MIN_SIDE:
            raise RealisticSettingError(f"--size {hw[0]}x{hw[1]}: the realistic generator needs H, W >= "
                                        f"{MIN_SIDE}")

    def record(self) -> dict:
        """The settings as recorded in split.json and hashed into the cache key (``scenes`` only when
        not the default, so default splits keep their record)."""
        out = {"mode": self.mode, "spp": int(self.spp) if self.mode == "path" else None,
               "max_people": int(self.max_people)}
        return out if self.scenes == "default" else {**out, "scenes": self.scenes}


def _threads() -> int | None:
    value = os.environ.get(THREADS_ENV)
    return int(value) if value else None


def realistic_sample(seed: int, index: int, hw: tuple[int, int] = (256, 192),
                     settings: RealisticSettings | None = None, people_fn=None) -> dict:
    """Render sample ``index`` of the realistic split with ``seed`` (independent of the split size).

    Args:
        seed: split seed.
        index: image index.
        hw: (H, W).
        settings: render settings (default :class:`RealisticSettings`).
        people_fn: ``(rng, n_people) -> list of PersonMesh``; default anny people
            (``people.sample_people``). Tests pass a stand-in.

    Returns:
        The keys of :func:`sapiens2.datasets.synth.synth_sample`: ``image``, ``label``, ``normal``,
        ``pointmap``, ``mask``, ``albedo``, ``K``, ``people`` (``keypoints``, ``bbox``, ``area``).
    """
    settings = settings or RealisticSettings()
    settings.check(hw)
    rng = sample_rng(seed, index)
    scene = realistic_scene(rng, hw, settings, people_fn)
    threads = _threads()
    if threads is not None:  # a worker's share of the CPU: anny's torch as well as the renderer
        import torch

        torch.set_num_threads(threads)
    mi = load_mitsuba(threads)
    render_seed = int(rng.integers(2**31))
    r = render_all(scene, mi, settings.mode, settings.spp, render_seed)
    return {
        "image": r["image"], "label": r["label"], "normal": r["normal"], "pointmap": r["pointmap"],
        "mask": r["mask"], "albedo": r["albedo"], "K": r["K"],
        "people": [{"keypoints": p["keypoints"], "bbox": p["bbox"], "area": p["area"]} for p in r["people"]],
    }


def realistic_scene(rng: np.random.Generator, hw: tuple[int, int], settings: RealisticSettings,
                    people_fn=None):
    """The scene of one sample, drawn from the sample's ``rng`` (see :func:`realistic_sample`)."""
    n_people = int(rng.integers(1, settings.max_people + 1))
    mix = SCENE_MIXES[settings.scenes]
    if people_fn is None:
        people = sample_people(rng, n_people, people_settings(settings.scenes))
    else:
        people = people_fn(rng, n_people)
    # looked up at call time: the capsule ablation (benchmarks/analysis/capsule_people.py) swaps it
    return scene_module.compose_scene(rng, tuple(hw), people, framing=mix.framing,
                                      max_objects=mix.max_objects, max_cover=mix.max_cover)


def people_settings(scenes: str):
    """How :func:`~.people.sample_people` draws the people of ``scenes`` (one of :data:`SCENES`)."""
    return SCENE_MIXES[scenes].people_settings()


def sample_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of sample ``index`` of the split with ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(index), _STREAM]))


def prepare(progress: bool = True, bodies: bool = True) -> str:
    """Check the renderer and build anny's model cache if it is missing (minutes, once), with progress.

    Args:
        progress: print a ticking progress line while anny builds its cache.
        bodies: also load the anny body model (off: the renderer check only).

    Returns:
        The Mitsuba variant chosen.

    Raises:
        RendererMissingError: mitsuba is not installed or cannot render.
        BenchError: anny is not installed.
    """
    require_mitsuba()
    variant = choose_variant()
    if bodies:
        problem = anny_problem(require_cache=False)
        if problem is not None:
            raise BenchError(f"the realistic synthetic generator (--generator realistic) needs anny: "
                             f"{problem}")
        if anny_problem() is not None:  # installed, its model cache not built yet: build it once, here
            _with_ticker("building anny's model cache once (minutes, about 3 GB of memory, 0.9 GB on disk)",
                         _build_anny_cache, progress)
        _with_ticker("loading anny's body model", anny_model, progress)
    return variant


def _build_anny_cache() -> None:
    """anny's own cache build (what ``anny.Anny(phenotypes="all")`` does on first use)."""
    import anny

    anny.Anny(phenotypes="all")


def _with_ticker(what: str, fn, progress: bool):
    """Run ``fn()`` while a line on stderr shows the seconds elapsed (when it takes over a second)."""
    if not progress:
        return fn()
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(1.0):
            print(f"\r{what}: {time.monotonic() - start:.0f} s", end="", file=sys.stderr, flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        return fn()
    finally:
        done.set()
        ticker.join()
        if time.monotonic() - start >= 1.0:
            print(f"\r{what}: done in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
