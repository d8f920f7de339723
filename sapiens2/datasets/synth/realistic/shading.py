"""The ``fast`` image: shading computed in NumPy from the ground-truth pass (no second render).

Each visible surface is Lambertian: albedo / pi times the irradiance of the environment map at its
normal (a precomputed table over directions) plus the point and spot lights' cosine-weighted
intensity over squared distance. No shadows or inter-reflections: cheap and noise-free except
for a little sensor noise, for CI-sized splits; ``path`` mode is the physically based image.
Pixels with no surface show the environment map. Directions follow Mitsuba's ``envmap``: texel
(row, column) of an H x W map looks along (sin t sin p, cos t, -sin t cos p) with t = pi (row + 0.5) / H
and p = 2 pi (column + 0.5) / W, turned by the environment's yaw about world y.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from .environment import Environment
from .scene import RealisticScene

TABLE_HW = (32, 64)  # irradiance table resolution (irradiance varies slowly with the normal)
BLOCK = 4  # environment-map texels summed per source in the irradiance integral
NOISE_STD = 0.01  # sensor noise, relative to the exposure's white


def _texel_directions(hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Unit directions (H, W, 3) of the lat-long texel centres and their solid angles (H, W)."""
    h, w = hw
    theta = math.pi * (np.arange(h) + 0.5) / h
    phi = 2 * math.pi * (np.arange(w) + 0.5) / w
    t, p = np.meshgrid(theta, phi, indexing="ij")
    d = np.stack([np.sin(t) * np.sin(p), np.cos(t), -np.sin(t) * np.cos(p)], axis=-1)
    solid = np.sin(t) * (math.pi / h) * (2 * math.pi / w)
    return d, solid


def _yaw(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _lookup(table: np.ndarray, dirs_local: np.ndarray) -> np.ndarray:
    """Bilinear look-up of a lat-long table (H, W, 3) along local directions (..., 3)."""
    h, w = table.shape[:2]
    theta = np.arccos(np.clip(dirs_local[..., 1], -1, 1))
    phi = np.mod(np.arctan2(dirs_local[..., 0], -dirs_local[..., 2]), 2 * math.pi)
    rows = theta / math.pi * h - 0.5
    cols = phi / (2 * math.pi) * w - 0.5
    wrapped = np.concatenate([table, table[:, :1]], axis=1)  # azimuth wraps around
    out = np.empty(dirs_local.shape[:-1] + (3,))
    for c in range(3):
        out[..., c] = ndimage.map_coordinates(wrapped[..., c], [rows, np.where(cols < 0, cols + w, cols)],
                                              order=1, mode="nearest")
    return out


def irradiance_table(env: Environment) -> np.ndarray:
    """Irradiance E(n) (TABLE_HW x 3) of the environment map at the table's normals (map frame)."""
    dirs, solid = _texel_directions(env.envmap.shape[:2])
    power = env.envmap.astype(np.float64) * solid[..., None]
    h, w = env.envmap.shape[:2]
    if h % BLOCK == 0 and w % BLOCK == 0:  # sum BLOCK x BLOCK texels into one source at their mean direction
        power = power.reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK, 3).sum(axis=(1, 3))
        dirs = dirs.reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK, 3).mean(axis=(1, 3))
        dirs /= np.linalg.norm(dirs, axis=-1, keepdims=True)
    radiance = power.reshape(-1, 3)
    normals, _ = _texel_directions(TABLE_HW)
    cosines = np.clip(normals.reshape(-1, 3) @ dirs.reshape(-1, 3).T, 0, None)
    return (cosines @ radiance).reshape(*TABLE_HW, 3)


def _lights(env: Environment, points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Irradiance (N, 3) from the point and spot lights at world points with world normals."""
    total = np.zeros(points.shape)
    for light in env.lights:
        to_light = light.position - points
        dist2 = np.maximum(np.sum(to_light**2, axis=-1), 1e-6)
        ldir = to_light / np.sqrt(dist2)[:, None]
        cos = np.clip(np.sum(normals * ldir, axis=-1), 0, None)
        falloff = np.ones(len(points))
        if light.cone_deg > 0:
            axis = light.target - light.position
            axis = axis / np.linalg.norm(axis)
            angle = np.degrees(np.arccos(np.clip(-ldir @ axis, -1, 1)))
            inner = 0.7 * light.cone_deg
            falloff = np.clip((light.cone_deg - angle) / (light.cone_deg - inner), 0, 1)
        total += (cos * falloff / dist2)[:, None] * light.radiance
    return total


def shade_fast(scene: RealisticScene, gt: dict, seed: int) -> np.ndarray:
    """Linear radiance (H x W x 3) of the scene, shaded from ``gt`` (:func:`render.render_ground_truth`)."""
    cam, env = scene.camera, scene.environment
    h, w = cam.hw
    R, t = cam.world_to_cam[:3, :3], cam.world_to_cam[:3, 3]
    to_local = _yaw(env.yaw).T  # world -> environment-map frame
    hit = np.isfinite(gt["zbuffer"])
    n_world = gt["surface_normal"][hit] @ R  # camera -> world (R orthonormal)
    table = irradiance_table(env)
    irradiance = _lookup(table, n_world @ to_local.T)
    z = gt["zbuffer"][hit]
    v, u = np.nonzero(hit)
    rays = np.stack([u, v, np.ones_like(u)], axis=-1) @ np.linalg.inv(cam.K).T
    p_world = (rays * z[:, None] - t) @ R
    irradiance += _lights(env, p_world, n_world)
    out = np.empty((h, w, 3))
    out[hit] = gt["surface_albedo"][hit] / math.pi * irradiance
    vv, uu = np.nonzero(~hit)
    if len(vv):
        d_cam = np.stack([uu, vv, np.ones_like(uu)], axis=-1) @ np.linalg.inv(cam.K).T
        d_world = d_cam @ R
        d_world /= np.linalg.norm(d_world, axis=-1, keepdims=True)
        out[~hit] = _lookup(env.envmap.astype(np.float64), d_world @ to_local.T)
    noise = np.random.default_rng(int(seed)).normal(0, NOISE_STD, out.shape)
    scale = float(np.percentile(out @ np.array([0.2126, 0.7152, 0.0722]), 97)) or 1.0
    return np.clip(out + noise * scale, 0, None)
