"""Iris and pupil: generator geometry on anny's eyeballs, and the exact points of their rims.

anny's eyeball is a 72-vertex sphere (radius about 16 mm) with no iris or pupil, so the generator
adds both as thin spherical caps just outside the eyeball, centred on the gaze (anny's rest gaze is
straight ahead, -y in anny's frame, turned with the eye bone). Their rims are the iris and pupil
keypoints; the caps are drawn from the same rings, so labels and geometry agree exactly.
"""

from __future__ import annotations

import numpy as np

from .bodies import ANNY_TO_WORLD, PosedBody, bone_index, dominant_bone

# Rim radii as fractions of the eyeball radius (about 5.8 mm and 2.1 mm on anny's 16 mm eyeball: a
# typical adult iris of 11.7 mm and a mid-sized pupil).
IRIS_FRACTION = 0.36
PUPIL_FRACTION = 0.13
CAP_LIFT = {"iris": 0.0004, "pupil": 0.0007}  # metres outside the eyeball, so the caps cover its facets
# clock positions as seen from the front: 3 o'clock on the image right = the person's left (+x)
CLOCK_DEG = {"3": 0.0, "12": 90.0, "9": 180.0, "6": 270.0, "midpoint_1": 45.0, "midpoint_4": 135.0,
             "midpoint_3": 225.0, "midpoint_2": 315.0}


def _rest_frame(body: PosedBody, side: str) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """The eyeball's rest centre, radius and its gaze/right/up axes (world axes)."""
    b = bone_index()[f"eye.{side}"]
    centre = body.rest_bone_heads[b]
    ball = body.rest_vertices[dominant_bone() == b]
    radius = float(np.linalg.norm(ball - centre, axis=1).max())
    gaze = ANNY_TO_WORLD @ np.array([0.0, -1.0, 0.0])
    right = np.array([1.0, 0.0, 0.0])  # the person's left = image right for a frontal view
    up = np.cross(gaze, right)
    up *= np.sign(up[1])
    return centre, radius, gaze, right, up


def ring_points(body: PosedBody, side: str, ring: str, angles_deg: np.ndarray,
                fraction: float | None = None) -> np.ndarray:
    """Posed world points of one rim (``ring`` "iris" or "pupil") at clock angles (degrees).

    ``fraction`` overrides the rim radius (as a fraction of the eyeball radius; 0 = the cap's centre).
    """
    centre, radius, gaze, right, up = _rest_frame(body, side)
    frac = {"iris": IRIS_FRACTION, "pupil": PUPIL_FRACTION}[ring] if fraction is None else fraction
    alpha = np.arcsin(frac)
    lift = radius + CAP_LIFT[ring]
    a = np.radians(np.asarray(angles_deg, dtype=np.float64))
    across = np.cos(a)[:, None] * right + np.sin(a)[:, None] * up
    dirs = np.cos(alpha) * gaze[None] + np.sin(alpha) * across
    rest = centre + lift * dirs
    b = bone_index()[f"eye.{side}"]
    return (rest - body.rest_bone_heads[b]) @ body.bone_rotations[b].T + body.bone_heads[b]


def cap_mesh(body: PosedBody, side: str, ring: str, segments: int = 24, rings: int = 4):
    """A spherical cap (posed vertices, triangles) covering one rim's disc."""
    outer = IRIS_FRACTION if ring == "iris" else PUPIL_FRACTION
    angles = np.linspace(0.0, 360.0, segments, endpoint=False)
    verts = [ring_points(body, side, ring, np.zeros(1), fraction=0.0)]
    for k in range(1, rings + 1):
        verts.append(ring_points(body, side, ring, angles, fraction=outer * k / rings))
    verts = np.concatenate(verts)
    tris = [[0, 1 + j, 1 + (j + 1) % segments] for j in range(segments)]
    for k in range(1, rings):
        a0, a1 = 1 + (k - 1) * segments, 1 + k * segments
        for j in range(segments):
            jn = (j + 1) % segments
            tris += [[a0 + j, a1 + j, a1 + jn], [a0 + j, a1 + jn, a0 + jn]]
    return verts, np.array(tris, dtype=np.int64)
