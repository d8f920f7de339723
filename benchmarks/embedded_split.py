"""The main job's embedded synthetic split: its generator, its settings, where it is cached.

:func:`default_data_dir` renders (once) and returns the split the main job and ``probe`` read when no
``--data`` is given; :func:`split_generator` turns ``--generator`` and the realistic render flags
into the synthetic writer's ``generator`` argument (``data synth`` uses it too, so that its defaults
are the main job's).
"""

from __future__ import annotations

import os

from benchmarks.job_defaults import (
    DEFAULT_SPLIT_IMAGES,
    QUICK_SPLIT_IMAGES,
    SPLIT_RENDER,
    SPLIT_SPP,
    SPLIT_WORKERS,
)
from sapiens2.datasets.synth import ensure_default_split
from sapiens2.datasets.synth.realistic.sample import RealisticSettings
from sapiens2.datasets.synth.writer import resolve_generator
from sapiens2.errors import BenchError


def split_generator(name: str | None = None, quick: bool = False, render: str | None = None,
                    spp: int | None = None, people: int | None = None, scenes: str | None = None):
    """The synthetic writer's ``generator`` for a generator name and the realistic render flags.

    Args:
        name: ``realistic`` / ``procedural``; None: ``procedural`` when ``quick``, else ``realistic``.
        quick: the quick protocol's default (procedural: the tests' speed).
        render, spp, people, scenes: the realistic generator's ``--render`` / ``--spp`` / ``--people``
            / ``--scenes`` (None: :data:`SPLIT_RENDER`, :data:`SPLIT_SPP`, the generator's own people
            count and its ``default`` scene mix).

    Returns:
        None for the procedural generator, else a validated ``RealisticSettings``.

    Raises:
        UnknownNameError: an unknown generator (names ``--generator``).
        ValueError: a realistic flag given with the procedural generator, or an impossible setting
            (names the flag).
    """
    name = name or ("procedural" if quick else "realistic")
    if name != "realistic":
        resolve_generator(name)  # an unknown name: an error naming --generator
        given = {"--render": render, "--spp": spp, "--people": people, "--scenes": scenes}
        for flag, value in given.items():
            if value is not None:
                raise ValueError(f"{flag} applies to --generator realistic only (not {name})")
        return None

    people = RealisticSettings().max_people if people is None else people
    settings = RealisticSettings(mode=render or SPLIT_RENDER, spp=SPLIT_SPP if spp is None else spp,
                                 max_people=people, scenes=scenes or "default")
    settings.check()
    return settings


def check_generator_flag(generator: str | None, data, quick: bool = False) -> None:
    """Refuse, before any work, a ``--generator`` that is unknown or given together with ``--data``.

    Raises:
        ValueError: naming ``--generator`` (and ``--data`` for the clash).
    """
    if generator is None:
        return
    if data is not None:
        raise ValueError(f"--generator {generator} chooses the embedded split; not with --data {data}")
    split_generator(generator, quick=quick)


def default_data_dir(protocol, quick: bool = False, generator: str | None = None) -> str:
    """The cached embedded synthetic split at the protocol's input size (``quick``: the small one).

    Args:
        protocol: the probing protocol (its input size is the split's image size).
        quick: the quick protocol's small split.
        generator: ``realistic`` / ``procedural``; None: :func:`split_generator`'s default
            (realistic, procedural under ``quick``). The cache key includes it and its settings.
    """
    n = QUICK_SPLIT_IMAGES if quick else DEFAULT_SPLIT_IMAGES
    settings = split_generator(generator, quick=quick)
    workers = 1 if settings is None else max(1, min(SPLIT_WORKERS, os.cpu_count() or 1))
    try:
        return str(ensure_default_split("probe", n, tuple(protocol.input_size), 0, workers=workers,
                                        generator=settings))
    except BenchError as e:
        if settings is None or not _realistic_missing():
            raise
        raise BenchError(f"{e}. The main job's default split is the realistic one: install the "
                         "'realistic' extra (scripts/bootstrap.sh does), or pass --generator procedural "
                         "for the ray-cast people") from e


def _realistic_missing() -> bool:
    """True when the realistic generator's packages (mitsuba, drjit, anny) are not importable."""
    import importlib.util

    return any(importlib.util.find_spec(name) is None for name in ("mitsuba", "drjit", "anny"))
