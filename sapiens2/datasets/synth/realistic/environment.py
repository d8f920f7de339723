"""Procedural lighting environments: an environment map (sky, studio, overcast, indoor) plus lights.

No image files ship or download: each environment map is a small lat-long radiance array computed
here (a sky gradient with a sun, a studio's grey sweep with soft boxes, an overcast dome, a warm
room), and 0-3 point or spot lights are added. The albedo ground truth does not depend
on any of it (tests/sapiens2/datasets/synth/realistic/test_render.py renders one scene under two
environments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

KINDS = ("sky", "studio", "overcast", "indoor")
ENV_HW = (64, 128)  # lat-long resolution: lighting only, never seen sharply


@dataclass(frozen=True)
class Light:
    """A point light (``cone_deg`` 0) or a spot light aimed at ``target`` with that cone half-angle.

    Lights have no geometry, so nothing in the image is missing from the ground truth.
    """

    position: np.ndarray
    target: np.ndarray
    radiance: np.ndarray  # RGB intensity (point) or radiance (area)
    cone_deg: float = 0.0


@dataclass(frozen=True)
class Environment:
    """An environment map (H x W x 3 float32 radiance, lat-long, world y up) and extra lights."""

    kind: str
    envmap: np.ndarray
    lights: list[Light] = field(default_factory=list)
    yaw: float = 0.0  # rotation of the map about world y, radians


def _directions(hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Elevation (radians, +pi/2 up) and azimuth of each lat-long texel centre."""
    h, w = hw
    elev = math.pi / 2 - (np.arange(h) + 0.5) / h * math.pi
    azim = (np.arange(w) + 0.5) / w * 2 * math.pi
    return np.meshgrid(elev, azim, indexing="ij")


def _sky(rng: np.random.Generator) -> np.ndarray:
    elev, azim = _directions(ENV_HW)
    zenith = np.array([0.25, 0.45, 0.9]) * rng.uniform(0.6, 1.2)
    horizon = np.array([0.85, 0.9, 1.0]) * rng.uniform(0.7, 1.3)
    ground = np.array([0.3, 0.27, 0.22]) * rng.uniform(0.3, 0.8)
    up = np.clip(elev / (math.pi / 2), 0, 1)[..., None]
    img = np.where(elev[..., None] > 0, horizon * (1 - up) + zenith * up, ground)
    sun_el, sun_az = rng.uniform(0.2, 1.3), rng.uniform(0, 2 * math.pi)
    cosang = (np.sin(elev) * math.sin(sun_el) + np.cos(elev) * math.cos(sun_el) * np.cos(azim - sun_az))
    sun = np.exp((cosang - 1) / 0.0015) * rng.uniform(150, 400)
    return img + sun[..., None] * np.array([1.0, 0.95, 0.85])


def _studio(rng: np.random.Generator) -> np.ndarray:
    elev, azim = _directions(ENV_HW)
    grey = rng.uniform(0.15, 0.5)
    img = np.full(ENV_HW + (3,), grey) * (0.6 + 0.4 * np.clip(np.sin(elev) + 0.5, 0, 1))[..., None]
    for _ in range(int(rng.integers(2, 4))):  # soft boxes: bright rectangles in the map
        el, az = rng.uniform(0.1, 0.9), rng.uniform(0, 2 * math.pi)
        d_az = np.angle(np.exp(1j * (azim - az)))
        box = (np.abs(elev - el) < rng.uniform(0.12, 0.3)) & (np.abs(d_az) < rng.uniform(0.15, 0.4))
        img[box] += rng.uniform(3.0, 9.0) * rng.uniform(0.85, 1.0, 3)
    return img


def _overcast(rng: np.random.Generator) -> np.ndarray:
    elev, _ = _directions(ENV_HW)
    level = rng.uniform(0.6, 1.4)
    dome = level * (1 + 2 * np.clip(np.sin(elev), 0, 1)) / 3  # brighter at the zenith (CIE overcast-like)
    img = np.where(elev[..., None] > 0, dome[..., None], 0.25 * level) * rng.uniform(0.9, 1.0, 3)
    return img


def _indoor(rng: np.random.Generator) -> np.ndarray:
    elev, azim = _directions(ENV_HW)
    wall = rng.uniform(0.1, 0.35) * np.array([1.0, 0.85, 0.7])
    img = np.broadcast_to(wall, ENV_HW + (3,)).copy()
    window_az = rng.uniform(0, 2 * math.pi)
    win = (np.abs(np.angle(np.exp(1j * (azim - window_az)))) < 0.35) & (elev > 0.0) & (elev < 0.6)
    img[win] = rng.uniform(2.0, 6.0) * np.array([0.9, 0.95, 1.0])
    return img


_MAPS = {"sky": _sky, "studio": _studio, "overcast": _overcast, "indoor": _indoor}


def sample_environment(rng: np.random.Generator, subject: np.ndarray, kind: str | None = None) -> Environment:
    """One lighting environment around a subject standing at ``subject`` (world, metres).

    Args:
        rng: the scene's generator.
        subject: the point the area and point lights aim at.
        kind: one of :data:`KINDS`, or None to sample one.
    """
    kind = str(rng.choice(KINDS)) if kind is None else kind
    if kind not in _MAPS:
        raise ValueError(f"unknown lighting environment {kind!r}; known: {', '.join(KINDS)}")
    envmap = _MAPS[kind](rng).astype(np.float32)
    lights = []
    n_lights = {"sky": (0, 1), "studio": (1, 3), "overcast": (0, 1), "indoor": (1, 3)}[kind]
    for _ in range(int(rng.integers(n_lights[0], n_lights[1] + 1))):
        az, el, dist = rng.uniform(0, 2 * math.pi), rng.uniform(0.2, 1.0), rng.uniform(2.0, 4.0)
        pos = np.asarray(subject, float) + dist * np.array(
            [math.cos(el) * math.sin(az), math.sin(el) + 0.3, math.cos(el) * math.cos(az)])
        colour = rng.uniform(0.8, 1.0, 3)
        cone = 0.0 if rng.random() < 0.5 else float(rng.uniform(25, 50))
        lights.append(Light(pos, np.asarray(subject, float) + [0, 1.0, 0], colour * rng.uniform(8, 30), cone))
    return Environment(kind, envmap, lights, float(rng.uniform(0, 2 * math.pi)))


def mitsuba_emitters(env: Environment, mi) -> dict:
    """The scene-dict entries of the environment's emitters (keys ``env``, ``light0``, ...)."""
    rot = mi.ScalarTransform4f().rotate(axis=[0, 1, 0], angle=math.degrees(env.yaw))
    out = {"env": {"type": "envmap", "bitmap": mi.Bitmap(np.ascontiguousarray(env.envmap)), "to_world": rot}}
    for i, light in enumerate(env.lights):
        intensity = {"type": "rgb", "value": light.radiance.tolist()}
        if light.cone_deg <= 0:
            out[f"light{i}"] = {"type": "point", "position": light.position.tolist(), "intensity": intensity}
            continue
        out[f"light{i}"] = {
            "type": "spot", "intensity": intensity, "cutoff_angle": light.cone_deg,
            "beam_width": 0.7 * light.cone_deg,
            "to_world": mi.ScalarTransform4f().look_at(origin=light.position.tolist(),
                                                       target=light.target.tolist(), up=[0, 1, 0]),
        }
    return out


def mirrored(env: Environment) -> Environment:
    """The environment mirrored in the world plane x = 0 (for the left/right consistency check)."""
    M = np.array([-1.0, 1.0, 1.0])
    lights = [Light(li.position * M, li.target * M, li.radiance, li.cone_deg) for li in env.lights]
    return Environment(env.kind, env.envmap[:, ::-1].copy(), lights, -env.yaw)
