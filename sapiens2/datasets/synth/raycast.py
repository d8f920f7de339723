"""Analytic ray casting of capsules and ellipsoids with a z-buffer, vectorised over pixels.

All geometry is in the OpenCV camera frame (x right, y down, z forward, metres) with the camera
at the origin. Each primitive is intersected with the rays of the pixels inside its projected
bounding box at once (NumPy); a z-buffer keeps the nearest hit per pixel together with the
primitive id, the surface normal and the hit's position along the primitive's axis (used to
split one capsule into, e.g., a sleeve and bare skin).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NEAR = 0.05  # metres; primitives closer than this to the camera are not drawn


@dataclass
class Capsule:
    """A segment ``a``-``b`` swept by a sphere of ``radius`` (camera frame after ``to_camera``)."""

    a: np.ndarray
    b: np.ndarray
    radius: float
    tag: dict = field(default_factory=dict)


@dataclass
class Ellipsoid:
    """An ellipsoid: ``center``, rotation ``rot`` (columns = local axes) and semi-axes ``radii``."""

    center: np.ndarray
    rot: np.ndarray
    radii: np.ndarray
    tag: dict = field(default_factory=dict)


def pixel_rays(height: int, width: int, K: np.ndarray) -> np.ndarray:
    """Unit ray directions (H x W x 3) through pixel centres for intrinsics ``K``."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    x = (u - K[0, 2]) / K[0, 0]
    y = (v - K[1, 2]) / K[1, 1]
    d = np.stack([x, y, np.ones_like(x)], axis=-1)
    return d / np.linalg.norm(d, axis=-1, keepdims=True)


def _sphere_hit(d: np.ndarray, c: np.ndarray, r: float) -> np.ndarray:
    """First hit distance of rays ``d`` (N x 3, origin 0) with a sphere; inf on a miss."""
    b = d @ c
    h = b * b - (c @ c - r * r)
    t = np.full(d.shape[0], np.inf)
    ok = h >= 0
    t[ok] = b[ok] - np.sqrt(h[ok])
    t[t <= NEAR] = np.inf
    return t


def intersect_capsule(d: np.ndarray, cap: Capsule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intersect rays ``d`` (N x 3, origin 0) with a capsule.

    Args:
        d: unit ray directions.
        cap: the capsule (camera frame).

    Returns:
        (t, normal, s): hit distances (inf on a miss), unit normals (N x 3) and the axial position
        of the hit in [0, 1] from ``a`` to ``b``.
    """
    a, b, r = cap.a, cap.b, cap.radius
    ba = b - a
    baba = ba @ ba
    # Finite cylinder: |(p - a) x ba|^2 = r^2 |ba|^2 with p = t d, 0 < (p - a).ba < |ba|^2.
    bard = d @ ba
    baoa = -(a @ ba)
    rdoa = -(d @ a)
    oaoa = a @ a
    qa = baba - bard * bard
    qb = baba * rdoa - baoa * bard
    qc = baba * oaoa - baoa * baoa - r * r * baba
    h = qb * qb - qa * qc
    t_cyl = np.full(d.shape[0], np.inf)
    ok = (h >= 0) & (qa > 1e-12)
    t_cyl[ok] = (-qb[ok] - np.sqrt(h[ok])) / qa[ok]
    y = baoa + t_cyl * bard
    t_cyl[(y <= 0) | (y >= baba) | (t_cyl <= NEAR)] = np.inf
    t = np.minimum(t_cyl, np.minimum(_sphere_hit(d, a, r), _sphere_hit(d, b, r)))
    p = d * np.where(np.isfinite(t), t, 0.0)[:, None]
    s = np.clip(((p - a) @ ba) / max(baba, 1e-12), 0.0, 1.0)
    n = p - (a + s[:, None] * ba)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    return t, n, s


def intersect_ellipsoid(d: np.ndarray, ell: Ellipsoid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intersect rays ``d`` (N x 3, origin 0) with an ellipsoid.

    Returns:
        (t, normal, s): hit distances (inf on a miss), unit normals and the hit's local height
        coordinate in [0, 1] along the ellipsoid's second axis (0 = bottom, 1 = top).
    """
    rot, radii = ell.rot, ell.radii
    o_loc = (rot.T @ (-ell.center)) / radii
    d_loc = (d @ rot) / radii
    qa = np.einsum("ij,ij->i", d_loc, d_loc)
    qb = d_loc @ o_loc
    qc = o_loc @ o_loc - 1.0
    h = qb * qb - qa * qc
    t = np.full(d.shape[0], np.inf)
    ok = h >= 0
    t[ok] = (-qb[ok] - np.sqrt(h[ok])) / qa[ok]
    t[t <= NEAR] = np.inf
    p_loc = o_loc + d_loc * np.where(np.isfinite(t), t, 0.0)[:, None]
    n = (p_loc / radii) @ rot.T
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    s = np.clip(0.5 * (p_loc[:, 1] + 1.0), 0.0, 1.0)
    return t, n, s


def _screen_box(centers: list[np.ndarray], radius: float, K: np.ndarray, hw: tuple[int, int]):
    """Conservative pixel box (y0, y1, x0, x1) of spheres around ``centers``; None if off-screen."""
    xs, ys = [], []
    for c in centers:
        z = c[2] - radius
        if z <= NEAR:
            return 0, hw[0], 0, hw[1]  # too close to bound tightly: test every pixel
        for sx in (-1, 1):
            for sy in (-1, 1):
                xs.append(K[0, 0] * (c[0] + sx * radius) / z + K[0, 2])
                xs.append(K[0, 0] * (c[0] + sx * radius) / (c[2] + radius) + K[0, 2])
                ys.append(K[1, 1] * (c[1] + sy * radius) / z + K[1, 2])
                ys.append(K[1, 1] * (c[1] + sy * radius) / (c[2] + radius) + K[1, 2])
    x0, x1 = int(np.floor(min(xs))) - 1, int(np.ceil(max(xs))) + 2
    y0, y1 = int(np.floor(min(ys))) - 1, int(np.ceil(max(ys))) + 2
    x0, y0 = max(x0, 0), max(y0, 0)
    x1, y1 = min(x1, hw[1]), min(y1, hw[0])
    if x0 >= x1 or y0 >= y1:
        return None
    return y0, y1, x0, x1


def render(prims: list, K: np.ndarray, hw: tuple[int, int]) -> dict:
    """Z-buffer render of ``prims`` (camera frame).

    Args:
        prims: list of :class:`Capsule` / :class:`Ellipsoid`.
        K: 3 x 3 intrinsics.
        hw: (height, width) in pixels.

    Returns:
        dict with ``depth`` (ray distance, inf = no hit), ``prim`` (index or -1), ``normal``
        (H x W x 3), ``axial`` (H x W, the ``s`` of the winning primitive) and ``rays``.
    """
    h, w = hw
    rays = pixel_rays(h, w, K)
    depth = np.full((h, w), np.inf)
    prim_id = np.full((h, w), -1, dtype=np.int32)
    normal = np.zeros((h, w, 3))
    axial = np.zeros((h, w))
    for i, prim in enumerate(prims):
        if isinstance(prim, Capsule):
            box = _screen_box([prim.a, prim.b], prim.radius, K, hw)
            fn = intersect_capsule
        else:
            box = _screen_box([prim.center], float(np.max(prim.radii)), K, hw)
            fn = intersect_ellipsoid
        if box is None:
            continue
        y0, y1, x0, x1 = box
        d = rays[y0:y1, x0:x1].reshape(-1, 3)
        t, n, s = fn(d, prim)
        zb = depth[y0:y1, x0:x1].reshape(-1)
        win = t < zb
        if not win.any():
            continue
        sub = (slice(y0, y1), slice(x0, x1))
        bw = win.reshape(y1 - y0, x1 - x0)
        depth[sub][bw] = t[win]
        prim_id[sub][bw] = i
        normal[sub][bw] = n[win]
        axial[sub][bw] = s[win]
    return {"depth": depth, "prim": prim_id, "normal": normal, "axial": axial, "rays": rays}
