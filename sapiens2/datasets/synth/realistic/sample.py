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
from .occluders import MAX_COVER
from .people import PeopleSettings, sample_people
from .poses import PHOTO_POSE_WEIGHTS, POSES
from .render import render_all
from .variant import choose_variant, load_mitsuba, require_mitsuba

THREADS_ENV = "SAPIENS2_RENDER_THREADS"  # render threads per process (the writer sets it per worker)
MODES = ("fast", "path")
MAX_PEOPLE = 4
MAX_SPP = 4096
MIN_SIDE = 16
SIMPLE_POSES = ("stand", "walk")
# People in the "photo" scenes stand more beside than behind one another (the placement disc's depth
# extent relative to its width), so they overlap in the image less often.
PHOTO_DEPTH_RATIO = 0.35
# Share of people in the "photo" scenes turned towards the camera (yaw within about +-40 degrees of
# it), as most people in photos are.
FACING_SHARE = 0.75


@dataclass(frozen=True)
class SceneMix:
    """What the scenes of one ``scenes`` name hold (see :data:`SCENE_MIXES`).

    Attributes:
        pose_names: the named poses people take.
        pose_weights: relative frequency by pose name (None: all equally often).
        facing_share: share of people turned towards the camera (the rest face any direction).
        depth_ratio: placement disc depth over width (below 1: people beside rather than behind
            one another).
        framing: one camera framing for every image, or None for the sampled mix.
        max_objects: at most this many occluding objects per image.
        max_cover: the largest share of the framed person's image box one object may cover.
    """

    pose_names: tuple[str, ...] = tuple(POSES)
    pose_weights: dict[str, float] | None = None
    facing_share: float = 0.0
    depth_ratio: float = 1.0
    framing: str | None = None
    max_objects: int = 2
    max_cover: float = MAX_COVER


# "default": the benchmark's scenes: every pose of the pose set equally often, people facing any
# direction and placed anywhere around the first, every framing, occluding objects; "photo": the
# same with photo-like pose frequencies (poses.PHOTO_POSE_WEIGHTS: lying rare), most people turned
# towards the camera and standing beside rather than behind one another (a measured variant,
# docs/synthetic_data.md);
# "simple": a control for measurements, not a benchmark split: people standing or walking, the
# whole first person in view, no occluding objects (what a typical full-body photo holds)
SCENE_MIXES: dict[str, SceneMix] = {
    "default": SceneMix(),
    "photo": SceneMix(pose_weights=PHOTO_POSE_WEIGHTS, facing_share=FACING_SHARE,
                      depth_ratio=PHOTO_DEPTH_RATIO),
    "simple": SceneMix(pose_names=SIMPLE_POSES, framing="full_body", max_objects=0),
    "exp_a": SceneMix(pose_weights=PHOTO_POSE_WEIGHTS, facing_share=FACING_SHARE,
                      depth_ratio=PHOTO_DEPTH_RATIO, max_objects=1, max_cover=0.3),
    "exp_b": SceneMix(pose_names=SIMPLE_POSES, framing="full_body", max_objects=0,
                      facing_share=FACING_SHARE, depth_ratio=PHOTO_DEPTH_RATIO),
    "exp_c": SceneMix(pose_weights=PHOTO_POSE_WEIGHTS, facing_share=FACING_SHARE,
                      depth_ratio=PHOTO_DEPTH_RATIO, framing="full_body", max_objects=0),
    "matched": SceneMix(pose_weights={"stand": 0.25, "walk": 0.25, "arms_up": 0.2 / 3, "wave": 0.2 / 3,
                                      "reach": 0.2 / 3, "crouch": 0.1, "point": 0.1, "hands_on_hips": 0.1,
                                      "sit_floor": 0.0, "kneel": 0.0, "lie": 0.0, "lie_side": 0.0},
                        facing_share=0.65, framing="full_body"),
    "exp_d": SceneMix(pose_names=SIMPLE_POSES, max_objects=0,
                      facing_share=FACING_SHARE, depth_ratio=PHOTO_DEPTH_RATIO),
}
SCENES = tuple(SCENE_MIXES)
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
            raise RealisticSettingError(f"scenes {self.scenes!r}: expected one of {', '.join(SCENES)}")
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
    mix = SCENE_MIXES[scenes]
    names = mix.pose_names
    weights = None if mix.pose_weights is None else tuple(mix.pose_weights[k] for k in names)
    return PeopleSettings(pose_names=names, pose_weights=weights, facing_share=mix.facing_share,
                          depth_ratio=mix.depth_ratio)


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
