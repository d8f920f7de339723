"""Capsule bodies along an anny person's skeleton: the same-pose ablation of the realism measurement.

A capsule person keeps everything of an anny ``PersonMesh`` except the surface: capsules (a
cylinder with two hemispherical caps) run along the person's bones between its keypoints (arms,
legs, feet, hands, fingers, spine, neck) and a sphere stands for the head. Each capsule vertex
takes the albedo of the nearest anny vertex and each capsule face the seg class of the nearest
anny face, so colours, classes, pose, camera, lights and keypoints stay those of the anny person:
only the body's shape changes.

:func:`capsule_scenes` swaps the people of every realistic scene for their capsule versions
after the scene (camera, occluders, lighting) was composed around the anny bodies, so both
conditions see the same cameras and the same random streams.

Example:
    >>> import numpy as np
    >>> v, f = capsule_mesh(np.zeros(3), np.array([0.0, 1.0, 0.0]), 0.1)
    >>> bool(v[:, 1].max() > 1.09 and v[:, 1].min() < -0.09)
    True
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np

from sapiens2.datasets.synth.realistic import scene as scene_module
from sapiens2.datasets.synth.realistic.occluders import SceneMesh
from sapiens2.reference import keypoints308

# (from keypoint, to keypoint, radius in metres); names of keypoints308
BONES: tuple[tuple[str, str, float], ...] = (
    ("left_shoulder", "left_elbow", 0.045), ("right_shoulder", "right_elbow", 0.045),
    ("left_elbow", "left_wrist", 0.035), ("right_elbow", "right_wrist", 0.035),
    ("left_wrist", "left_middle_finger_third_joint", 0.03),
    ("right_wrist", "right_middle_finger_third_joint", 0.03),
    ("left_hip", "left_knee", 0.07), ("right_hip", "right_knee", 0.07),
    ("left_knee", "left_ankle", 0.05), ("right_knee", "right_ankle", 0.05),
    ("left_heel", "left_big_toe", 0.035), ("right_heel", "right_big_toe", 0.035),
    ("left_ankle", "left_heel", 0.04), ("right_ankle", "right_heel", 0.04),
    ("left_shoulder", "right_shoulder", 0.06), ("left_hip", "right_hip", 0.08),
    *((f"{side}_{finger}_third_joint", f"{side}_{finger}4", 0.009) for side in ("left", "right")
      for finger in ("forefinger", "middle_finger", "ring_finger", "pinky_finger")),
    ("left_thumb2", "left_thumb4", 0.01), ("right_thumb2", "right_thumb4", 0.01),
)
TORSO_RADIUS_OF_SHOULDER_WIDTH = 0.33  # the spine capsule's radius, a fraction of the shoulder width
HEAD_RADIUS_OF_EAR_DISTANCE = 0.62  # the head sphere's radius, a fraction of the ear-to-ear distance
INTERIOR_CLASS = 28  # seg_classes29 "Tongue": inside the mouth, never what a capsule surface shows


def capsule_mesh(a: np.ndarray, b: np.ndarray, radius: float, rings: int = 5,
                 segments: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-wound triangle mesh of the capsule from ``a`` to ``b``.

    Args:
        a: one end of the axis (3,).
        b: the other end (3,); ``a == b`` gives a sphere.
        radius: capsule radius.
        rings: latitude rows per cap.
        segments: longitude columns.

    Returns:
        (vertices (V, 3), faces (F, 3) int64).
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    axis = b - a
    length = float(np.linalg.norm(axis))
    z = axis / length if length > 1e-9 else np.array([0.0, 1.0, 0.0])
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 0.0, 1.0])
    x = np.cross(z, helper)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    theta = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring_dir = np.cos(theta)[:, None] * x + np.sin(theta)[:, None] * y  # (S, 3)
    rows = []
    for phi in np.linspace(-np.pi / 2, 0, rings + 1)[1:]:  # lower cap up to the equator, around a
        rows.append(a + radius * (np.cos(phi) * ring_dir + np.sin(phi) * z))
    for phi in np.linspace(0, np.pi / 2, rings + 1)[:-1]:  # upper cap from the equator, around b
        rows.append(b + radius * (np.cos(phi) * ring_dir + np.sin(phi) * z))
    vertices = np.concatenate([(a - radius * z)[None], *rows, (b + radius * z)[None]])
    n_rows, top = len(rows), len(vertices) - 1
    faces = []
    for s in range(segments):
        t = (s + 1) % segments
        faces.append((0, 1 + t, 1 + s))  # bottom fan
        for r in range(n_rows - 1):
            p, q = 1 + r * segments, 1 + (r + 1) * segments
            faces += [(p + s, p + t, q + t), (p + s, q + t, q + s)]
        last = 1 + (n_rows - 1) * segments
        faces.append((last + s, last + t, top))  # top fan
    faces = np.asarray(faces, np.int64)
    centre = vertices.mean(0)
    tri = vertices[faces]
    outward = np.einsum("ij,ij->i", np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]),
                        tri.mean(1) - centre)
    if np.sum(outward) < 0:  # wound inward: flip every face
        faces = faces[:, ::-1].copy()
    return vertices, faces


def _bones(person) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(a, b, radius) of every capsule of ``person`` whose two keypoints are defined."""
    ids = {k["name"]: k["id"] for k in keypoints308()["keypoints"]}
    kp, ok = np.asarray(person.keypoints, float), np.asarray(person.keypoint_defined, bool)

    def point(name):
        return kp[ids[name]] if ok[ids[name]] else None

    out = [(point(p), point(q), r) for p, q, r in BONES if ok[ids[p]] and ok[ids[q]]]
    needed = ("left_shoulder", "right_shoulder", "left_hip", "right_hip", "left_ear", "right_ear")
    missing = [n for n in needed if point(n) is None]
    if missing:
        raise ValueError(f"person {person.name!r}: keypoints {missing} undefined; a capsule body needs them")
    shoulders = (point("left_shoulder") + point("right_shoulder")) / 2
    hips = (point("left_hip") + point("right_hip")) / 2
    head = (point("left_ear") + point("right_ear")) / 2
    width = float(np.linalg.norm(point("left_shoulder") - point("right_shoulder")))
    ears = float(np.linalg.norm(point("left_ear") - point("right_ear")))
    neck = point("neck") if point("neck") is not None else shoulders
    out += [(hips, shoulders, TORSO_RADIUS_OF_SHOULDER_WIDTH * width), (neck, head, 0.05),
            (head, head, HEAD_RADIUS_OF_EAR_DISTANCE * ears)]
    return out


def capsule_person(person, index: int):
    """The :class:`~sapiens2.datasets.synth.realistic.occluders.SceneMesh` of ``person``'s capsule body.

    Args:
        person: an anny ``PersonMesh``.
        index: the person's index in its scene.
    """
    from scipy.spatial import cKDTree

    parts, offset = [], 0
    faces_all = []
    for a, b, r in _bones(person):
        v, f = capsule_mesh(a, b, r)
        parts.append(v)
        faces_all.append(f + offset)
        offset += len(v)
    vertices, faces = np.concatenate(parts), np.concatenate(faces_all)
    anny_v = np.asarray(person.vertices, float)
    classes = np.asarray(person.face_class, np.uint8)
    # the tongue lies inside the head, nearer to the head sphere than the skin in places: left out
    outer = classes != INTERIOR_CLASS
    anny_f = np.asarray(person.faces, np.int64)[outer]
    used = np.unique(anny_f)
    albedo = np.asarray(person.vertex_albedo, np.float32)[used[cKDTree(anny_v[used]).query(vertices)[1]]]
    nearest_face = cKDTree(anny_v[anny_f].mean(1)).query(vertices[faces].mean(1))[1]
    face_class = classes[outer][nearest_face]
    return SceneMesh(f"{person.name}_capsules", vertices, faces, albedo, face_class, index, True)


@contextlib.contextmanager
def capsule_scenes():
    """Within the block, realistic scenes show capsule bodies instead of anny bodies.

    The scene is composed around the anny people first (camera framing, back wall, occluders and
    lighting drawn from the same random stream), then each person's mesh is replaced by its capsule
    body; keypoints and their definitions stay the anny person's. Works in this process only (the
    split writer with ``workers=1``).
    """
    compose = scene_module.compose_scene

    def compose_with_capsules(rng, hw, people, *args, **kwargs):
        scene = compose(rng, hw, people, *args, **kwargs)
        bodies = [capsule_person(p, i) for i, p in enumerate(people)]
        return replace(scene, meshes=bodies + list(scene.meshes[len(people):]))

    scene_module.compose_scene = compose_with_capsules
    try:
        yield
    finally:
        scene_module.compose_scene = compose
