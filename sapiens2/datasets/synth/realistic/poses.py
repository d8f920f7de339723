"""Natural poses for anny bodies: a small named pose set, joint-limited perturbation, a torso check.

A pose is a set of bone rotations in anny's ``local-ref`` convention: each rotation turns a bone about
its head relative to its parent, in axes aligned with anny's rest frame (x = the person's left,
y = backward, z = up; the rest pose is anny's A-pose). The tables give the *left* bone (``.L``) or a
centre bone, as a sequence of (axis, degrees) turns about fixed axes; the right side mirrors them
(a rotation vector (x, y, z) becomes (x, -y, -z)). Axis ``e`` is the elbow hinge of the rest arm
(perpendicular to the rest upper arm, in the body's frontal plane): negative angles flex the elbow.

Sign guide (left side): about x, negative swings a limb forward (flexion), positive backward; about
y, positive brings the A-pose arm down to the side, negative raises it sideways; about z, positive
turns the limb's front outward. Knees flex with positive x, elbows with negative e.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from .bodies import bone_index

# the rest upper arm points about 50 degrees below horizontal; its elbow hinge lies in the frontal plane
_ELBOW_AXIS_L = np.array([np.cos(np.radians(40.0)), 0.0, np.sin(np.radians(40.0))])
# the rest upper arm's own direction (out and down): turns about it twist the arm (positive: inward)
_ARM_AXIS_L = np.array([np.cos(np.radians(50.0)), 0.0, -np.sin(np.radians(50.0))])
_AXES = {"x": np.array([1.0, 0.0, 0.0]), "y": np.array([0.0, 1.0, 0.0]), "z": np.array([0.0, 0.0, 1.0]),
         "e": _ELBOW_AXIS_L, "a": _ARM_AXIS_L}

# Joint limits (degrees) on the rotation vector's components, per bone stem (left side; the right
# mirrors). Loose anatomical ranges from the A-pose, used to clip the random perturbation.
JOINT_LIMITS = {
    "spine01": ((-40, 25), (-20, 20), (-30, 30)),
    "spine02": ((-20, 15), (-15, 15), (-20, 20)),
    "spine03": ((-20, 15), (-15, 15), (-20, 20)),
    "neck01": ((-40, 40), (-30, 30), (-60, 60)),
    "head": ((-30, 30), (-20, 20), (-40, 40)),
    "clavicle": ((-15, 15), (-10, 20), (-15, 15)),
    "upperarm01": ((-170, 60), (-110, 60), (-80, 80)),
    "lowerarm01": ((-150, 5), (-150, 5), (-60, 60)),
    "wrist": ((-60, 60), (-30, 30), (-70, 70)),
    "upperleg01": ((-120, 30), (-40, 40), (-40, 40)),
    "lowerleg01": ((0, 150), (-5, 5), (-20, 20)),
    "foot": ((-40, 30), (-15, 15), (-20, 20)),
}
# Perturbation spread (degrees, one sigma) per bone stem.
PERTURB_SIGMA = {"spine01": 5, "spine02": 3, "spine03": 3, "neck01": 8, "head": 8, "clavicle": 3,
                 "upperarm01": 10, "lowerarm01": 10, "wrist": 12, "upperleg01": 5, "lowerleg01": 5, "foot": 5}

_ARMS_DOWN = [("y", 38)]
# Named poses: bone stem -> turns; "L"/"R" suffixed stems for asymmetric ones; "global" turns the
# whole body (anny axes) before it is put on the floor; "fingers" curls every finger joint (degrees).
POSES: dict[str, dict] = {
    "stand": {"upperarm01": _ARMS_DOWN + [("x", -5)], "lowerarm01": [("e", 5)], "fingers": 10},
    "walk": {"upperarm01.L": _ARMS_DOWN + [("x", -20)], "upperarm01.R": _ARMS_DOWN + [("x", 20)],
             "lowerarm01": [("e", -5)], "upperleg01.L": [("x", 20)], "upperleg01.R": [("x", -25)],
             "lowerleg01.L": [("x", 15)], "lowerleg01.R": [("x", 5)], "fingers": 15},
    "arms_up": {"upperarm01": [("y", -100)], "lowerarm01": [("e", -10)], "fingers": 5},
    "crouch": {"spine01": [("x", -25)], "upperleg01": [("x", -110), ("z", 10)], "lowerleg01": [("x", 125)],
               "foot": [("x", -25)], "upperarm01": _ARMS_DOWN + [("x", -20)], "lowerarm01": [("e", -30)],
               "fingers": 25},
    "sit_floor": {"upperleg01": [("x", -90), ("z", 5)], "lowerleg01": [("x", 20)],
                  "upperarm01": _ARMS_DOWN + [("x", 25), ("y", -10)], "lowerarm01": [("e", -10)],
                  "fingers": 15},
    "kneel": {"upperleg01": [("x", -10)], "lowerleg01": [("x", 135)], "foot": [("x", 30)],
              "upperarm01": _ARMS_DOWN + [("x", -10)], "lowerarm01": [("e", -35)], "fingers": 20},
    "reach": {"spine01": [("x", -10)], "upperarm01.R": [("x", -100)], "lowerarm01.R": [("e", -5)],
              "upperarm01.L": _ARMS_DOWN, "upperleg01.R": [("x", -10)], "fingers": 10},
    "wave": {"upperarm01.L": [("a", -90), ("y", -45)], "lowerarm01.L": [("e", -90)],
             "upperarm01.R": _ARMS_DOWN, "lowerarm01.R": [("e", -10)], "fingers": 5},
    "point": {"upperarm01.R": [("y", 30), ("x", -80)], "lowerarm01.R": [("e", -5)],
              "upperarm01.L": _ARMS_DOWN, "head": [("z", -15)], "fingers": 10},
    "hands_on_hips": {"upperarm01": [("a", 90), ("x", 15)], "lowerarm01": [("e", -60)], "fingers": 10},
    "lie": {"global": [("x", -90)], "upperarm01": _ARMS_DOWN + [("y", -5)], "lowerarm01": [("e", -10)],
            "fingers": 10},
    "lie_side": {"global": [("z", 90), ("x", -90)], "upperleg01": [("x", -30)], "lowerleg01": [("x", 40)],
                 "upperarm01": _ARMS_DOWN + [("x", -40)], "lowerarm01": [("e", -50)], "fingers": 20},
}
# How often each pose appears in the "photo" scenes, roughly as in photos of people: upright poses
# most often, sitting, crouching and kneeling less, lying rarely (about 5 % of people). The default
# scenes draw every pose equally often.
PHOTO_POSE_WEIGHTS: dict[str, float] = {
    "stand": 1.0, "walk": 1.0, "arms_up": 1.0, "reach": 1.0, "wave": 1.0, "point": 1.0,
    "hands_on_hips": 1.0, "crouch": 0.6, "sit_floor": 0.6, "kneel": 0.6, "lie": 0.25, "lie_side": 0.25,
}
_FINGER_STEMS = ("finger1-2", "finger1-3", "finger2-1", "finger2-2", "finger2-3", "finger3-1", "finger3-2",
                 "finger3-3", "finger4-1", "finger4-2", "finger4-3", "finger5-1", "finger5-2", "finger5-3")


def _turns_to_rotvec(turns: list[tuple[str, float]]) -> np.ndarray:
    """Compose turns about fixed axes (the first applied first) into one rotation vector (radians)."""
    rot = Rotation.identity()
    for axis, degrees in turns:
        if axis not in _AXES:
            raise ValueError(f"unknown turn axis {axis!r} (expected one of {sorted(_AXES)})")
        rot = Rotation.from_rotvec(_AXES[axis] * np.radians(degrees)) * rot
    return rot.as_rotvec()


def _mirror(rotvec: np.ndarray) -> np.ndarray:
    return rotvec * np.array([1.0, -1.0, -1.0])


def _bone_rotvecs(pose: dict) -> dict[str, np.ndarray]:
    """Bone label -> rotation vector (radians) of one named pose (the global turn excluded)."""
    out: dict[str, np.ndarray] = {}
    for stem, turns in pose.items():
        if stem in ("global", "fingers"):
            continue
        if stem.endswith((".L", ".R")):
            v = _turns_to_rotvec(turns)
            out[stem] = v if stem.endswith(".L") else _mirror(v)
        elif stem in ("spine01", "spine02", "spine03", "neck01", "head"):
            out[stem] = _turns_to_rotvec(turns)
        else:
            out[stem + ".L"] = _turns_to_rotvec(turns)
            out.setdefault(stem + ".R", _mirror(_turns_to_rotvec(turns)))
    curl = np.radians(float(pose.get("fingers", 0.0)))
    for finger in _FINGER_STEMS:
        # fingers curl toward the palm, which faces the body's side in the rest pose: about anny's y
        out[finger + ".L"] = np.array([0.0, curl, 0.0])
        out[finger + ".R"] = _mirror(out[finger + ".L"])
    return out


@dataclass(frozen=True)
class Pose:
    """A pose: its name, one rotation vector per bone label, and the whole-body turn (anny axes)."""

    name: str
    rotvecs: dict[str, np.ndarray]
    global_rotvec: np.ndarray

    def matrices(self) -> np.ndarray:
        """(B, 3, 3) per-bone rotations in rig order (identity for bones the pose leaves alone)."""
        index = bone_index()
        out = np.tile(np.eye(3), (len(index), 1, 1))
        for label, vec in self.rotvecs.items():
            if label not in index:
                raise ValueError(f"pose {self.name!r} turns bone {label!r}, which anny's rig lacks")
            out[index[label]] = Rotation.from_rotvec(vec).as_matrix()
        return out


@functools.cache
def named_pose(name: str) -> Pose:
    """One pose of :data:`POSES`, unperturbed."""
    if name not in POSES:
        raise ValueError(f"unknown pose {name!r}; the pose set is {sorted(POSES)}")
    pose = POSES[name]
    return Pose(name, _bone_rotvecs(pose), _turns_to_rotvec(pose.get("global", [])))


def _limits(label: str) -> tuple | None:
    stem = label[:-2] if label.endswith((".L", ".R")) else label
    return JOINT_LIMITS.get(stem)


def clip_to_limits(label: str, rotvec: np.ndarray) -> np.ndarray:
    """``rotvec`` with each component clipped to the bone's joint limits (mirrored for ``.R``)."""
    limits = _limits(label)
    if limits is None:
        return rotvec
    left = _mirror(rotvec) if label.endswith(".R") else rotvec
    lo = np.radians([a for a, _ in limits])
    hi = np.radians([b for _, b in limits])
    clipped = np.clip(left, lo, hi)
    return _mirror(clipped) if label.endswith(".R") else clipped


def perturb(pose: Pose, rng: np.random.Generator, scale: float = 1.0) -> Pose:
    """The pose with Gaussian noise on every limited bone, clipped to :data:`JOINT_LIMITS`."""
    rotvecs = dict(pose.rotvecs)
    for label in bone_index():
        stem = label[:-2] if label.endswith((".L", ".R")) else label
        if stem not in PERTURB_SIGMA:
            continue
        base = rotvecs.get(label, np.zeros(3))
        noise = rng.normal(0.0, np.radians(PERTURB_SIGMA[stem]) * scale, size=3)
        rotvecs[label] = clip_to_limits(label, base + noise)
    return Pose(pose.name, rotvecs, pose.global_rotvec.copy())


def vertex_normals(vertices: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(V, 3) unit area-weighted vertex normals (zero for unused vertices)."""
    n = np.cross(vertices[tris[:, 1]] - vertices[tris[:, 0]], vertices[tris[:, 2]] - vertices[tris[:, 0]])
    out = np.zeros_like(vertices)
    for k in range(3):
        np.add.at(out, tris[:, k], n)
    length = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, length, out=np.zeros_like(out), where=length > 0)


@functools.cache
def _check_groups() -> tuple[np.ndarray, np.ndarray]:
    """(torso vertex ids, forearm-and-hand vertex ids) by each vertex's dominant bone."""
    from .bodies import dominant_bone

    index = bone_index()
    torso = [i for label, i in index.items() if label.startswith(("spine", "pelvis", "root", "clavicle"))]
    arm = [i for label, i in index.items() if label.startswith(("lowerarm", "wrist", "finger", "metacarpal"))]
    dom = dominant_bone()
    return np.flatnonzero(np.isin(dom, torso)), np.flatnonzero(np.isin(dom, arm))


def torso_penetration(vertices: np.ndarray) -> float:
    """How deep (metres) the forearms and hands sink into the torso, 0 when they stay outside.

    Each forearm/hand vertex is compared with its nearest torso vertex q: its depth is how far it lies
    behind the torso surface along q's outward normal (only within 10 cm of q, so the far side of the
    body does not count). The maximum over the vertices is returned.
    """
    from scipy.spatial import cKDTree

    from .bodies import faces

    torso, arm = _check_groups()
    normals = vertex_normals(vertices, faces())
    dist, nearest = cKDTree(vertices[torso]).query(vertices[arm], distance_upper_bound=0.10)
    ok = np.isfinite(dist)
    if not ok.any():
        return 0.0
    q = torso[nearest[ok]]
    depth = -np.einsum("ij,ij->i", vertices[arm[ok]] - vertices[q], normals[q])
    return float(max(depth.max(), 0.0))
