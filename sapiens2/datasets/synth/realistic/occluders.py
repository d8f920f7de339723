"""Triangle meshes of the non-human scene: ground plane, back wall, and occluding objects.

Every object is a :class:`SceneMesh` with ``person = -1`` (background class 0 in every label map).
Boxes have one vertex set per face, so their shading normals stay flat; cylinders are smooth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SceneMesh:
    """A mesh of the scene. ``person`` >= 0 indexes the scene's people; -1 is not a person."""

    name: str
    vertices: np.ndarray  # (V, 3) float64 world metres
    faces: np.ndarray  # (F, 3) int
    vertex_albedo: np.ndarray  # (V, 3) float32 in [0, 1]
    face_class: np.ndarray  # (F,) uint8 29-class id (0 off-person)
    person: int = -1
    smooth: bool = True  # interpolate vertex normals (False: flat faces)

    def transformed(self, matrix: np.ndarray, name: str | None = None) -> SceneMesh:
        """This mesh under an affine 4x4 (a reflection flips the winding so faces stay outward)."""
        v = self.vertices @ matrix[:3, :3].T + matrix[:3, 3]
        faces = self.faces[:, ::-1].copy() if np.linalg.det(matrix[:3, :3]) < 0 else self.faces
        return SceneMesh(name or self.name, v, faces, self.vertex_albedo, self.face_class, self.person,
                         self.smooth)


def _flat(name: str, vertices: np.ndarray, faces: np.ndarray, colour: np.ndarray) -> SceneMesh:
    albedo = np.broadcast_to(np.asarray(colour, np.float32), (len(vertices), 3)).copy()
    return SceneMesh(name, np.asarray(vertices, float), np.asarray(faces, np.int64), albedo,
                     np.zeros(len(faces), np.uint8), -1, False)


def box(name: str, centre: np.ndarray, size: np.ndarray, yaw: float, colour: np.ndarray) -> SceneMesh:
    """An axis-aligned box of ``size`` (x, y, z) turned by ``yaw`` radians about world y."""
    corners = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    verts, faces = [], []
    for q in quads:  # 4 own vertices per side: flat shading normals
        base = len(verts)
        verts += [corners[i] for i in q]
        faces += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    c, s = math.cos(yaw), math.sin(yaw)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    v = (np.array(verts) * np.asarray(size)) @ rot.T + np.asarray(centre)
    return _flat(name, v, np.array(faces), colour)


def cylinder(name: str, base: np.ndarray, radius: float, height: float, colour: np.ndarray,
             segments: int = 24) -> SceneMesh:
    """A capped vertical cylinder standing on ``base``."""
    ang = np.linspace(0, 2 * math.pi, segments, endpoint=False)
    ring = np.stack([radius * np.cos(ang), np.zeros(segments), radius * np.sin(ang)], 1)
    v = np.concatenate([ring, ring + [0, height, 0], [[0, 0, 0], [0, height, 0]]]) + np.asarray(base)
    faces = []
    for i in range(segments):
        j = (i + 1) % segments
        faces += [(i, segments + i, segments + j), (i, segments + j, j)]
        faces += [(2 * segments, i, j), (2 * segments + 1, segments + j, segments + i)]
    return _flat(name, v, np.array(faces), colour)


def chair(name: str, base: np.ndarray, yaw: float, colour: np.ndarray) -> list[SceneMesh]:
    """A simple chair: seat, back rest and four legs (boxes)."""
    c, s = math.cos(yaw), math.sin(yaw)

    def at(x: float, y: float, z: float) -> np.ndarray:
        return np.asarray(base) + [c * x + s * z, y, -s * x + c * z]

    parts = [box(f"{name}_seat", at(0, 0.45, 0), (0.45, 0.05, 0.45), yaw, colour),
             box(f"{name}_back", at(0, 0.72, -0.2), (0.45, 0.5, 0.04), yaw, colour)]
    for k, (x, z) in enumerate([(-0.2, -0.2), (0.2, -0.2), (-0.2, 0.2), (0.2, 0.2)]):
        parts.append(box(f"{name}_leg{k}", at(x, 0.215, z), (0.04, 0.43, 0.04), yaw, colour * 0.8))
    return parts


def ground(rng: np.random.Generator, extent: float = 30.0) -> SceneMesh:
    """The floor (y = 0), facing up."""
    col = rng.uniform(0.15, 0.75, 3)
    v = np.array([[-extent, 0, -extent], [-extent, 0, extent], [extent, 0, extent], [extent, 0, -extent]])
    return _flat("ground", v, np.array([[0, 1, 2], [0, 2, 3]]), col)


def back_wall(rng: np.random.Generator, z: float, extent: float = 30.0) -> SceneMesh:
    """A wall at depth ``z`` behind the people, facing +z."""
    col = rng.uniform(0.2, 0.9, 3)
    v = np.array([[-extent, 0, z], [extent, 0, z], [extent, 8, z], [-extent, 8, z]])
    return _flat("wall", v, np.array([[0, 1, 2], [0, 2, 3]]), col)


# Occluders stand this far (metres, x-z) in front of the framed person, towards the camera, at most
# OCCLUDER_MAX_FRACTION of the way: furniture beside a person, not a wall in front of the lens.
OCCLUDER_DISTANCE = (0.3, 1.2)
OCCLUDER_MAX_FRACTION = 0.6
# An occluder may cover at most this share of the framed person's image box (its own image box
# intersected with the person's); one covering more is moved sideways, then left out.
MAX_COVER = 0.5
PLACEMENT_TRIES = 4


def _object(rng: np.random.Generator, i: int, base: np.ndarray) -> list[SceneMesh]:
    col = rng.uniform(0.1, 0.9, 3)
    kind = rng.choice(["box", "pole", "chair"])
    if kind == "box":
        size = rng.uniform([0.2, 0.3, 0.2], [0.7, 1.3, 0.6])
        return [box(f"box{i}", base + [0, size[1] / 2, 0], size, rng.uniform(-1, 1), col)]
    if kind == "pole":
        return [cylinder(f"pole{i}", base, rng.uniform(0.03, 0.12), rng.uniform(0.8, 2.4), col)]
    return chair(f"chair{i}", base, rng.uniform(-math.pi, math.pi), col)


def _image_box(camera, points: np.ndarray) -> np.ndarray | None:
    """(x0, y0, x1, y1) of the points' projection clipped to the image; None when none is in front."""
    cam = camera.to_camera(points)
    cam = cam[cam[:, 2] > 1e-3]
    if not len(cam):
        return None
    uv = camera.project(cam)
    h, w = camera.hw
    return np.array([max(uv[:, 0].min(), 0), max(uv[:, 1].min(), 0), min(uv[:, 0].max(), w),
                     min(uv[:, 1].max(), h)])


def cover_fraction(camera, person_vertices: np.ndarray, meshes: list[SceneMesh]) -> float:
    """The share of the person's image box that the objects' image box overlaps (0 when apart).

    An object wholly behind the camera covers nothing; one reaching from in front of the camera
    to behind it is treated as covering everything.
    """
    person = _image_box(camera, person_vertices)
    points = np.concatenate([m.vertices for m in meshes])
    if person is None or person[2] <= person[0] or person[3] <= person[1]:
        return 0.0
    behind = camera.to_camera(points)[:, 2] <= 1e-3
    if behind.all():
        return 0.0
    if behind.any():
        return 1.0
    obj = _image_box(camera, points)
    iw = min(person[2], obj[2]) - max(person[0], obj[0])
    ih = min(person[3], obj[3]) - max(person[1], obj[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    return float(iw * ih / ((person[2] - person[0]) * (person[3] - person[1])))


def sample_occluders(rng: np.random.Generator, subject: np.ndarray, eye: np.ndarray,
                     max_objects: int = 2, camera=None, person_vertices: np.ndarray | None = None,
                     max_cover: float = MAX_COVER) -> list[SceneMesh]:
    """0..``max_objects`` objects between the camera at ``eye`` and the person at ``subject``.

    Each object stands on the floor :data:`OCCLUDER_DISTANCE` in front of the subject (towards the
    camera, at most :data:`OCCLUDER_MAX_FRACTION` of the way) with a sideways offset, so it partly
    hides the person in many images. With ``camera`` and ``person_vertices`` (the framed person),
    an object whose image box covers more than ``max_cover`` of the person's image box is moved
    sideways (up to :data:`PLACEMENT_TRIES` draws) or else left out: the framed person is never
    blotted out whole.
    """
    subject = np.asarray(subject, float)
    towards = (np.asarray(eye, float) - subject) * np.array([1.0, 0.0, 1.0])
    reach = float(np.linalg.norm(towards))
    direction = towards / reach if reach > 1e-9 else np.array([0.0, 0.0, 1.0])
    side = np.array([direction[2], 0.0, -direction[0]])
    out: list[SceneMesh] = []
    for i in range(int(rng.integers(0, max_objects + 1))):
        d = min(rng.uniform(*OCCLUDER_DISTANCE), OCCLUDER_MAX_FRACTION * reach)
        front = subject + direction * d
        front[1] = 0.0
        for _ in range(PLACEMENT_TRIES):
            obj = _object(rng, i, front + side * rng.uniform(-0.6, 0.6))
            if camera is None or person_vertices is None or \
                    cover_fraction(camera, person_vertices, obj) <= max_cover:
                out += obj
                break
    return out
