"""A small stand-in for an anny ``PersonMesh``: ellipsoid body parts with known classes and keypoints.

Used by tests/sapiens2/datasets/synth/realistic/test_render.py so the renderer's checks do not depend on
the body model. The person faces +z, so their left side is at +x; smooth closed ellipsoids, one per part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FACE_NECK, LEFT_UPPER_ARM, RIGHT_UPPER_ARM, TORSO = 3, 11, 20, 22
LEFT_UPPER_LEG, RIGHT_UPPER_LEG, LEFT_LOWER_LEG, RIGHT_LOWER_LEG = 12, 21, 8, 17
LEFT_HAND, RIGHT_HAND = 6, 15
# keypoint index -> (part it lies in/on, whether it lies on the surface)
NOSE, L_SHOULDER, R_SHOULDER, L_ELBOW, R_ELBOW, L_HIP, R_HIP, L_KNEE, R_KNEE = 0, 5, 6, 7, 8, 9, 10, 11, 12


@dataclass(frozen=True)
class StandInPerson:
    """The fields of the interface's PersonMesh."""

    vertices: np.ndarray
    faces: np.ndarray
    face_class: np.ndarray
    vertex_albedo: np.ndarray
    keypoints: np.ndarray
    keypoint_defined: np.ndarray
    keypoint_surface: np.ndarray
    name: str = "standin"


def ellipsoid(centre, radii, rings: int = 24, segments: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV ellipsoid with outward winding: vertices (V, 3), faces (F, 3)."""
    verts = [[0.0, 1.0, 0.0]]
    for i in range(1, rings):
        th = math.pi * i / rings
        for j in range(segments):
            ph = 2 * math.pi * j / segments
            verts.append([math.sin(th) * math.cos(ph), math.cos(th), math.sin(th) * math.sin(ph)])
    verts.append([0.0, -1.0, 0.0])
    faces = []
    ring = lambda i, j: 1 + (i - 1) * segments + j % segments  # noqa: E731
    for j in range(segments):
        faces.append((0, ring(1, j + 1), ring(1, j)))
    for i in range(1, rings - 1):
        for j in range(segments):
            a, b, c, d = ring(i, j), ring(i, j + 1), ring(i + 1, j), ring(i + 1, j + 1)
            faces += [(a, b, d), (a, d, c)]
    last = len(verts) - 1
    for j in range(segments):
        faces.append((last, ring(rings - 1, j), ring(rings - 1, j + 1)))
    v = np.array(verts) * np.asarray(radii) + np.asarray(centre)
    return v, np.array(faces, np.int64)


# part class -> (centre, radii) of a 1.7 m person standing at the origin, facing +z
PARTS = {
    FACE_NECK: ((0.0, 1.58, 0.0), (0.1, 0.13, 0.11)),
    TORSO: ((0.0, 1.2, 0.0), (0.19, 0.3, 0.12)),
    LEFT_UPPER_ARM: ((0.26, 1.22, 0.0), (0.05, 0.27, 0.05)),
    RIGHT_UPPER_ARM: ((-0.26, 1.22, 0.0), (0.05, 0.27, 0.05)),
    LEFT_UPPER_LEG: ((0.1, 0.68, 0.0), (0.08, 0.26, 0.08)),
    RIGHT_UPPER_LEG: ((-0.1, 0.68, 0.0), (0.08, 0.26, 0.08)),
    LEFT_LOWER_LEG: ((0.1, 0.24, 0.0), (0.06, 0.24, 0.06)),
    RIGHT_LOWER_LEG: ((-0.1, 0.24, 0.0), (0.06, 0.24, 0.06)),
}
KEYPOINTS = {  # index -> (position, class of the part it belongs to, on the surface)
    NOSE: ((0.0, 1.58, 0.11), FACE_NECK, True),
    L_SHOULDER: ((0.26, 1.42, 0.0), LEFT_UPPER_ARM, False),
    R_SHOULDER: ((-0.26, 1.42, 0.0), RIGHT_UPPER_ARM, False),
    L_ELBOW: ((0.26, 1.0, 0.0), LEFT_UPPER_ARM, False),
    R_ELBOW: ((-0.26, 1.0, 0.0), RIGHT_UPPER_ARM, False),
    L_HIP: ((0.1, 0.85, 0.0), LEFT_UPPER_LEG, False),
    R_HIP: ((-0.1, 0.85, 0.0), RIGHT_UPPER_LEG, False),
    L_KNEE: ((0.1, 0.46, 0.0), LEFT_UPPER_LEG, False),
    R_KNEE: ((-0.1, 0.46, 0.0), RIGHT_UPPER_LEG, False),
}


def keypoint_classes() -> dict[int, int]:
    """Keypoint index -> the class of the part it belongs to."""
    return {k: cls for k, (_, cls, _) in KEYPOINTS.items()}


def standin_person(offset=(0.0, 0.0, 0.0), yaw: float = 0.0, seed: int = 0,
                   name: str = "standin") -> StandInPerson:
    """The stand-in person turned by ``yaw`` (radians about y) and moved by ``offset``."""
    rng = np.random.default_rng(seed)
    verts, faces, cls, alb = [], [], [], []
    for c, (centre, radii) in PARTS.items():
        v, f = ellipsoid(centre, radii)
        faces.append(f + sum(len(x) for x in verts))
        verts.append(v)
        cls.append(np.full(len(f), c, np.uint8))
        alb.append(np.tile(rng.uniform(0.2, 0.9, 3), (len(v), 1)))
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    kp = np.zeros((308, 3))
    defined = np.zeros(308, bool)
    surface = np.zeros(308, bool)
    for k, (pos, _, on_surface) in KEYPOINTS.items():
        kp[k], defined[k], surface[k] = pos, True, on_surface
    move = lambda p: p @ rot.T + np.asarray(offset, float)  # noqa: E731
    return StandInPerson(move(np.concatenate(verts)), np.concatenate(faces), np.concatenate(cls),
                         np.concatenate(alb).astype(np.float32), move(kp), defined, surface, name)
