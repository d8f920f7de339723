"""Clothes, hair, shoes and accessories on a posed anny body, with their 29-class labels and colours.

Garments are offset shells: the body faces a garment covers (chosen on the rest mesh by body part and
height, so they follow the pose) are copied and pushed out along the posed vertex normals by the
garment's thickness; the body stays underneath. Hair is a shell over the scalp (plus an optional
ponytail); a hat, a scarf and a backpack are the apparel; eyeglasses are a small frame mesh. Rigid
items ride on one bone (``PosedBody`` gives each bone's rest-to-posed motion).
"""

from __future__ import annotations

import colorsys
import functools
from dataclasses import dataclass

import numpy as np

from .bodies import PosedBody, anny_model, bone_index, dominant_bone, faces
from .eyes import cap_mesh
from .keypoints import eyebrow_ribbon
from .parts import class_ids
from .poses import vertex_normals


@dataclass(frozen=True)
class Dressed:
    """A body with its garments: one mesh, a class per face, an albedo per vertex."""

    vertices: np.ndarray
    faces: np.ndarray
    face_class: np.ndarray
    albedo: np.ndarray


class _Builder:
    """Accumulates mesh pieces (vertices, faces, class per face, albedo per vertex)."""

    def __init__(self, body: PosedBody, faces: np.ndarray, face_class: np.ndarray, albedo: np.ndarray):
        self.body = body
        self.base_faces = faces
        self.normals = vertex_normals(body.vertices, faces)
        self.parts = [(body.vertices, faces, face_class, albedo)]
        self.count = len(body.vertices)

    def add(self, vertices: np.ndarray, faces: np.ndarray, cls: int | np.ndarray, albedo: np.ndarray) -> None:
        cls = np.broadcast_to(np.asarray(cls, dtype=np.uint8), (len(faces),))
        albedo = np.broadcast_to(np.asarray(albedo, dtype=np.float64), (len(vertices), 3))
        self.parts.append((vertices, faces + self.count, cls, albedo))
        self.count += len(vertices)

    def shell(self, face_ids: np.ndarray, thickness: float, cls: int | np.ndarray, albedo_fn) -> None:
        """Offset copy of the body faces ``face_ids``; ``albedo_fn(rest_xyz) -> (n, 3)`` colours it."""
        if len(face_ids) == 0:
            return
        tris = self.base_faces[face_ids]
        used, local = np.unique(tris, return_inverse=True)
        verts = self.body.vertices[used] + thickness * self.normals[used]
        self.add(verts, local.reshape(-1, 3), cls, albedo_fn(self.body.rest_vertices[used]))

    def rigid(self, bone: str, rest_vertices: np.ndarray) -> np.ndarray:
        """Rest-pose points carried rigidly by ``bone`` to the posed body."""
        b = bone_index()[bone]
        body = self.body
        return (rest_vertices - body.rest_bone_heads[b]) @ body.bone_rotations[b].T + body.bone_heads[b]

    def result(self) -> Dressed:
        v, f, c, a = zip(*self.parts)
        return Dressed(np.concatenate(v), np.concatenate(f).astype(np.int64),
                       np.concatenate(c).astype(np.uint8), np.clip(np.concatenate(a), 0.0, 1.0))


def _colour(rng: np.random.Generator) -> np.ndarray:
    """A garment colour: mostly muted, sometimes saturated, sometimes near black or white."""
    kind = rng.uniform()
    if kind < 0.2:
        return np.full(3, rng.uniform(0.02, 0.08))
    if kind < 0.3:
        return np.full(3, rng.uniform(0.6, 0.85))
    s = rng.uniform(0.15, 0.5) if kind < 0.75 else rng.uniform(0.5, 0.9)
    return np.array(colorsys.hsv_to_rgb(rng.uniform(), s, rng.uniform(0.2, 0.8)))


def _pattern(rng: np.random.Generator):
    """A colouring function of rest positions: plain, stripes or checks of two colours."""
    a, b = _colour(rng), _colour(rng)
    kind = rng.choice(["plain", "plain", "stripes", "checks"])
    period = rng.uniform(0.03, 0.12)

    def paint(rest: np.ndarray) -> np.ndarray:
        if kind == "plain":
            return np.tile(a, (len(rest), 1))
        if kind == "stripes":
            on = np.floor(rest[:, 1] / period) % 2 == 0
        else:
            on = (np.floor(rest[:, 0] / period) + np.floor(rest[:, 1] / period)) % 2 == 0
        return np.where(on[:, None], a, b)

    return paint


@functools.cache
def _face_bones() -> np.ndarray:
    """(F,) the dominant bone label stem of each face's first vertex, for region rules."""
    labels = np.array(anny_model().bone_labels)
    return labels[dominant_bone()[faces()[:, 0]]]


def _regions(body: PosedBody, faces: np.ndarray, face_class: np.ndarray) -> dict[str, np.ndarray]:
    """Face-id sets on the rest body: torso above/below the waist, limbs, feet, shins, scalp, neck."""
    ids = class_ids()
    idx = bone_index()
    rest_c = body.rest_vertices[faces].mean(axis=1)
    heads = body.rest_bone_heads
    hip_y = heads[idx["upperleg01.L"], 1]
    shoulder_y = heads[idx["upperarm01.L"], 1]
    ankle_y = heads[idx["foot.L"], 1]
    knee_y = heads[idx["lowerleg01.L"], 1]
    waist_y = hip_y + 0.3 * (shoulder_y - hip_y)
    eye_y = heads[idx["eye.L"], 1]
    neck_y = heads[idx["neck01"], 1]
    head_y = heads[idx["head"], 1]
    head_z = heads[idx["head"], 2]

    def cls(*names: str) -> np.ndarray:
        return np.isin(face_class, [ids[n] for n in names])

    shin = cls("left_lower_leg", "right_lower_leg")

    bones = _face_bones()
    head = np.char.startswith(bones, "head")
    scalp = head & (((rest_c[:, 1] > eye_y + 0.035) & (rest_c[:, 2] < head_z + 0.06))
                    | ((rest_c[:, 1] > eye_y - 0.045) & (rest_c[:, 2] < head_z - 0.02)))
    return {
        "torso_top": np.flatnonzero(cls("torso") & (rest_c[:, 1] >= waist_y)),
        "torso_bottom": np.flatnonzero(cls("torso") & (rest_c[:, 1] < waist_y)),
        "upper_arms": np.flatnonzero(cls("left_upper_arm", "right_upper_arm")),
        "lower_arms": np.flatnonzero(cls("left_lower_arm", "right_lower_arm")),
        "upper_legs": np.flatnonzero(cls("left_upper_leg", "right_upper_leg")),
        "thighs_top": np.flatnonzero(cls("left_upper_leg", "right_upper_leg")
                                     & (rest_c[:, 1] > knee_y + 0.45 * (hip_y - knee_y))),
        "lower_legs": np.flatnonzero(shin & (rest_c[:, 1] > ankle_y + 0.03)),
        "shins_low": np.flatnonzero(shin & (rest_c[:, 1] <= ankle_y + 0.12)),
        "feet": np.flatnonzero(cls("left_foot", "right_foot") | (shin & (rest_c[:, 1] <= ankle_y + 0.03))),
        "scalp": np.flatnonzero(scalp),
        "crown": np.flatnonzero(head & (rest_c[:, 1] > head_y + 0.45 * (eye_y + 0.1 - head_y))
                                & (rest_c[:, 1] > eye_y + 0.045)),
        "neck": np.flatnonzero(np.char.startswith(bones, "neck") & (rest_c[:, 1] < neck_y + 0.09)),
    }


def _sided(face_class: np.ndarray, faces_ids: np.ndarray, left: str, right: str, fallback: str) -> np.ndarray:
    """Per-face class for a sided garment: left/right by the body part underneath."""
    ids = class_ids()
    under = face_class[faces_ids]
    left_parts = [ids[n] for n in ("left_foot", "left_lower_leg", "left_upper_leg")]
    right_parts = [ids[n] for n in ("right_foot", "right_lower_leg", "right_upper_leg")]
    out = np.full(len(faces_ids), ids[fallback], dtype=np.uint8)
    out[np.isin(under, left_parts)] = ids[left]
    out[np.isin(under, right_parts)] = ids[right]
    return out


def _box(centre: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned box (rest frame): 8 vertices, 12 outward triangles."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    tris = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                     [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return centre + corners * half, tris


def _merge(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    verts, tris, n = [], [], 0
    for v, t in pieces:
        verts.append(v)
        tris.append(t + n)
        n += len(v)
    return np.concatenate(verts), np.concatenate(tris)


def _tube(start: np.ndarray, direction: np.ndarray, length: float, r0: float, r1: float,
          segments: int = 10, rings: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A closed tapered tube (a ponytail) from ``start`` along ``direction``."""
    d = direction / np.linalg.norm(direction)
    a = np.cross(d, [1.0, 0.0, 0.0])
    a /= np.linalg.norm(a)
    b = np.cross(d, a)
    ang = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    verts = []
    for i in range(rings):
        t = i / (rings - 1)
        r = r0 + (r1 - r0) * t
        verts.append(start + d * length * t + r * (np.cos(ang)[:, None] * a + np.sin(ang)[:, None] * b))
    verts = np.concatenate(verts + [start[None], (start + d * length)[None]])
    tris = []
    for i in range(rings - 1):
        for j in range(segments):
            p, q = i * segments + j, i * segments + (j + 1) % segments
            tris += [[p, q, q + segments], [p, q + segments, p + segments]]
    cap0, cap1 = len(verts) - 2, len(verts) - 1
    last = (rings - 1) * segments
    for j in range(segments):
        tris += [[cap0, (j + 1) % segments, j], [cap1, last + j, last + (j + 1) % segments]]
    return verts, np.array(tris)


def _eyeglasses(body: PosedBody, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, bool]:
    """Rest-frame glasses: two rims, a bridge, two temples; dark lenses when sunglasses."""
    idx = bone_index()
    heads = body.rest_bone_heads
    eye_l, eye_r = heads[idx["eye.L"]], heads[idx["eye.R"]]
    rest = body.rest_vertices
    head_v = rest[dominant_bone() == idx["head"]]
    near = head_v[np.abs(head_v[:, 1] - eye_l[1]) < 0.01]
    half_head = float(np.abs(near[:, 0]).max()) + 0.004
    front = float(near[:, 2].max())  # the nose tip region at eye height bounds the frame's plane
    z = max(eye_l[2] + 0.028, front - 0.004)
    w, h, t = rng.uniform(0.022, 0.028), rng.uniform(0.014, 0.02), 0.0025
    pieces = []
    for eye in (eye_l, eye_r):
        c = np.array([eye[0], eye[1], z])
        pieces += [_box(c + [0, h, 0], [w, t, t]), _box(c - [0, h, 0], [w, t, t]),
                   _box(c + [w, 0, 0], [t, h, t]), _box(c - [w, 0, 0], [t, h, t])]
    bridge_x = abs(eye_l[0]) - w
    pieces.append(_box(np.array([0.0, eye_l[1] + h * 0.5, z]), [bridge_x, t, t]))
    ear_z = heads[idx["head"], 2] - 0.01
    for sign in (1.0, -1.0):
        outer = sign * (abs(eye_l[0]) + w)
        x = sign * max(abs(outer), half_head)
        depth = (z - ear_z) / 2
        pieces.append(_box(np.array([x, eye_l[1] + h * 0.6, z - depth]), [t, t, depth]))
        hinge = np.array([(outer + x) / 2, eye_l[1] + h * 0.6, z])
        pieces.append(_box(hinge, [abs(x - outer) / 2 + t, t, t]))
    sun = bool(rng.uniform() < 0.4)
    if sun:
        for eye in (eye_l, eye_r):
            pieces.append(_box(np.array([eye[0], eye[1], z]), [w, h, 0.001]))
    v, f = _merge(pieces)
    return v, f, sun


def _body_albedo(body: PosedBody, face_class: np.ndarray, faces: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """Per-vertex albedo of the bare body: skin, redder lips, white eyeballs (sclera)."""
    ids = class_ids()
    albedo = np.tile(skin, (len(body.vertices), 1))
    lips = np.unique(faces[np.isin(face_class, [ids["upper_lip"], ids["lower_lip"]])])
    albedo[lips] = skin * np.array([0.95, 0.62, 0.62])
    idx = bone_index()
    albedo[np.isin(dominant_bone(), [idx["eye.L"], idx["eye.R"]])] = [0.75, 0.72, 0.68]
    return albedo


def _add_irises(build: _Builder, rng: np.random.Generator) -> None:
    """Iris and pupil caps on both eyeballs (class face_neck), see :mod:`.eyes`."""
    iris = np.array(colorsys.hsv_to_rgb(rng.choice([0.07, 0.08, 0.55, 0.3]), rng.uniform(0.4, 0.8),
                                        rng.uniform(0.08, 0.45)))
    for side in ("L", "R"):
        for ring, colour in (("iris", iris), ("pupil", np.full(3, 0.015))):
            v, f = cap_mesh(build.body, side, ring)
            build.add(v, f, class_ids()["face_neck"], colour)


def _add_eyebrows(build: _Builder, colour: np.ndarray) -> None:
    """The eyebrow ribbons (class face_neck, as Sapiens labels eyebrows), see keypoints.eyebrow_ribbon."""
    for side in ("L", "R"):
        v, f = eyebrow_ribbon(build.body, side)
        build.add(v, f, class_ids()["face_neck"], colour)


HAIR_COLOURS = [(0.02, 0.015, 0.01), (0.08, 0.045, 0.02), (0.2, 0.11, 0.05), (0.45, 0.33, 0.18),
                (0.6, 0.45, 0.25), (0.35, 0.1, 0.04), (0.55, 0.55, 0.55)]


def dress(rng: np.random.Generator, body: PosedBody, skin: np.ndarray, face_class: np.ndarray,
          faces: np.ndarray, enabled: bool = True) -> Dressed:
    """The body with clothes, shoes, hair and (at random) a hat, a scarf, a backpack and eyeglasses.

    Args:
        rng: the random source (garment kinds, colours, patterns).
        body: the posed body.
        skin: (3,) skin albedo.
        face_class: (F,) classes of the bare body's faces.
        faces: (F, 3) the bare body's triangles.
        enabled: False gives the bare body (skin, lips, eyes with iris and pupil) only.
    """
    ids = class_ids()
    albedo = _body_albedo(body, face_class, faces, skin)
    build = _Builder(body, faces, face_class, albedo)
    _add_irises(build, rng)
    hair_colour = np.array(HAIR_COLOURS[rng.integers(len(HAIR_COLOURS))]) * rng.uniform(0.8, 1.2)
    _add_eyebrows(build, hair_colour * 0.8)
    if not enabled:
        return build.result()
    reg = _regions(body, faces, face_class)
    lower_kind = rng.choice(["trousers", "trousers", "shorts"])
    trousers = lower_kind == "trousers"
    lower = np.concatenate([reg["torso_bottom"], reg["upper_legs"] if trousers else reg["thighs_top"],
                            reg["lower_legs"] if trousers else np.zeros(0, np.int64)])
    build.shell(lower, 0.008, ids["lower_clothing"], _pattern(rng))
    upper_kind = rng.choice(["tshirt", "long_sleeve", "tank"])
    upper = [reg["torso_top"]]
    if upper_kind != "tank":
        upper.append(reg["upper_arms"])
    if upper_kind == "long_sleeve":
        upper.append(reg["lower_arms"])
    build.shell(np.concatenate(upper), 0.011, ids["upper_clothing"], _pattern(rng))
    if rng.uniform() < 0.9:
        shoe_class = _sided(face_class, reg["feet"], "left_shoe", "right_shoe", "left_shoe")
        build.shell(reg["feet"], 0.007, shoe_class, _pattern(rng))
        if lower_kind == "shorts" and rng.uniform() < 0.7:
            socks = reg["shins_low"]
            build.shell(socks, 0.003, _sided(face_class, socks, "left_sock", "right_sock", "left_sock"),
                        lambda r: np.tile(_colour(rng), (len(r), 1)))
    hair_thickness = 0.0
    if rng.uniform() < 0.9:
        hair_thickness = rng.uniform(0.004, 0.025)
        build.shell(reg["scalp"], hair_thickness, ids["hair"], lambda r: np.tile(hair_colour, (len(r), 1)))
        if rng.uniform() < 0.3:
            idx = bone_index()
            h = body.rest_bone_heads[idx["head"]]
            back = body.rest_vertices[dominant_bone() == idx["head"]][:, 2].min()
            start = np.array([0.0, h[1] + 0.06, back + 0.01])
            v, f = _tube(start, np.array([0.0, -1.0, -0.35]), rng.uniform(0.12, 0.28), 0.025, 0.012)
            build.add(build.rigid("head", v), f, ids["hair"], hair_colour)
    if rng.uniform() < 0.25:
        build.shell(reg["crown"], hair_thickness + 0.012, ids["apparel"], _pattern(rng))
    if rng.uniform() < 0.2:
        build.shell(reg["neck"], 0.018, ids["apparel"], _pattern(rng))
    if rng.uniform() < 0.2:
        build.add(*_backpack(build, body), ids["apparel"], _colour(rng))
    if rng.uniform() < 0.3:
        v, f, sun = _eyeglasses(body, rng)
        build.add(build.rigid("head", v), f, ids["eyeglass"], 0.03 if sun else _colour(rng) * 0.5)
    return build.result()


def _backpack(build: _Builder, body: PosedBody) -> tuple[np.ndarray, np.ndarray]:
    """A box on the upper back, carried by the chest bone."""
    idx = bone_index()
    chest = body.rest_bone_heads[idx["spine01"]]
    torso = body.rest_vertices[np.isin(dominant_bone(), [idx["spine01"], idx["spine02"]])]
    back = float(torso[:, 2].min())
    v, f = _box(np.array([0.0, chest[1] - 0.05, back - 0.075]), np.array([0.14, 0.2, 0.06]))
    return build.rigid("spine01", v), f
