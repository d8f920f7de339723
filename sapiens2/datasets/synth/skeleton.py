"""Articulated skeleton of the synthetic people: rig, joint limits, pose sampling, forward kinematics.

Body frame (metres): x = the subject's left, y = up, z = forward (the way the person faces).
The rest pose stands with the arms hanging, palms towards the thighs. Each joint has a rest
offset from its parent (in the parent's frame) and a local rotation built from named angles
that are sampled inside anatomical limits.
"""

from __future__ import annotations

import math

import numpy as np

FINGERS = ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger")
# Finger base offset in the wrist frame of the LEFT hand (x mirrored for the right) and the
# lengths of the three segments.
_FINGER_GEOM = {
    "thumb": ((-0.010, -0.022, 0.022), (0.036, 0.031, 0.026)),
    "forefinger": ((0.0, -0.088, 0.023), (0.042, 0.025, 0.020)),
    "middle_finger": ((0.0, -0.092, 0.008), (0.046, 0.028, 0.021)),
    "ring_finger": ((0.0, -0.088, -0.008), (0.043, 0.027, 0.020)),
    "pinky_finger": ((0.0, -0.079, -0.022), (0.034, 0.020, 0.018)),
}
# Joint limits in degrees: (flex, abduction, twist) ranges.
LIMITS = {
    "spine": ((-10, 30), (-12, 12), (-20, 20)),
    "chest": ((-10, 20), (-10, 10), (-20, 20)),
    "neck": ((-20, 30), (-10, 10), (-30, 30)),
    "head": ((-25, 25), (-15, 15), (-45, 45)),
    "shoulder": ((-50, 170), (-15, 165), (-60, 60)),
    "elbow": ((0, 145), (0, 0), (-70, 70)),
    "wrist": ((-60, 60), (-20, 30), (0, 0)),
    "hip": ((-25, 115), (-10, 45), (-30, 30)),
    "knee": ((0, 135), (0, 0), (0, 0)),
    "ankle": ((-30, 25), (-10, 10), (0, 0)),
    "finger": ((0, 95), (-12, 12), (0, 0)),
}


def rot_x(deg: float) -> np.ndarray:
    """Rotation about x by ``deg`` degrees."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.float64)


def rot_y(deg: float) -> np.ndarray:
    """Rotation about y by ``deg`` degrees."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=np.float64)


def rot_z(deg: float) -> np.ndarray:
    """Rotation about z by ``deg`` degrees."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.float64)


def build_rig(shape: dict) -> list[tuple[str, str | None, np.ndarray, np.ndarray]]:
    """The joints as (name, parent, rest offset, rest rotation), parents before children.

    Args:
        shape: body shape factors (``height``, ``shoulder``, ``hip``, ``hand``).
    """
    h, hand = shape["height"], shape["hand"]
    eye = np.eye(3)
    rig = [
        ("pelvis", None, np.zeros(3), eye),
        ("spine", "pelvis", np.array([0, 0.10, 0]) * h, eye),
        ("chest", "spine", np.array([0, 0.20, 0]) * h, eye),
        ("neck", "chest", np.array([0, 0.215, -0.012]) * h, eye),
        ("head", "neck", np.array([0, 0.085, 0.012]) * h, eye),
    ]
    for side, sx in (("l", 1.0), ("r", -1.0)):
        rig += [
            (f"{side}_shoulder", "chest", np.array([sx * 0.17 * shape["shoulder"], 0.155 * h, -0.012]), eye),
            (f"{side}_elbow", f"{side}_shoulder", np.array([0, -0.285, 0]) * h, eye),
            (f"{side}_wrist", f"{side}_elbow", np.array([0, -0.25, 0]) * h, eye),
            (f"{side}_hip", "pelvis", np.array([sx * 0.09 * shape["hip"], -0.07 * h, 0]), eye),
            (f"{side}_knee", f"{side}_hip", np.array([0, -0.43, 0]) * h, eye),
            (f"{side}_ankle", f"{side}_knee", np.array([0, -0.42, 0]) * h, eye),
        ]
        for finger in FINGERS:
            base, lengths = _FINGER_GEOM[finger]
            rest = rot_x(-50) @ rot_z(sx * 25) if finger == "thumb" else eye
            parent = f"{side}_wrist"
            offset = np.array([sx * base[0], base[1], base[2]]) * hand
            for k in range(1, 5):
                name = f"{side}_{finger}{k}"
                rig.append((name, parent, offset, rest if k == 1 else eye))
                parent = name
                if k < 4:
                    offset = np.array([0, -lengths[k - 1], 0]) * hand
    return rig


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


def sample_pose(rng: np.random.Generator) -> dict[str, tuple[float, float, float]]:
    """Sample (flex, abduction, twist) angles per joint, inside :data:`LIMITS`.

    A pose family (standing, walking, arms raised, crouching, free) sets the coarse pose; noise
    and the limits do the rest. For the left side a positive abduction moves the limb outwards;
    the sign is mirrored for the right side when the rotation is built.
    """
    family = rng.choice(["stand", "walk", "raise", "crouch", "free"], p=[0.25, 0.25, 0.2, 0.1, 0.2])
    a: dict[str, list[float]] = {}
    a["spine"] = [_u(rng, -5, 12), _u(rng, -6, 6), _u(rng, -12, 12)]
    a["chest"] = [_u(rng, -5, 8), _u(rng, -5, 5), _u(rng, -10, 10)]
    a["neck"] = [_u(rng, -10, 15), _u(rng, -5, 5), _u(rng, -15, 15)]
    a["head"] = [_u(rng, -15, 15), _u(rng, -10, 10), _u(rng, -35, 35)]
    for s in ("l", "r"):
        a[f"{s}_shoulder"] = [_u(rng, -20, 35), _u(rng, 5, 35), _u(rng, -30, 30)]
        a[f"{s}_elbow"] = [_u(rng, 5, 70), 0.0, _u(rng, -40, 40)]
        a[f"{s}_wrist"] = [_u(rng, -25, 25), _u(rng, -10, 15), 0.0]
        a[f"{s}_hip"] = [_u(rng, -8, 15), _u(rng, 0, 12), _u(rng, -10, 15)]
        a[f"{s}_knee"] = [_u(rng, 0, 20), 0.0, 0.0]
        a[f"{s}_ankle"] = [_u(rng, -10, 10), 0.0, 0.0]
    if family == "walk":
        swing = _u(rng, 15, 35) * (1 if rng.random() < 0.5 else -1)
        a["l_hip"][0], a["r_hip"][0] = swing, -swing * 0.8
        back = "r" if swing > 0 else "l"
        a[f"{back}_knee"][0] = _u(rng, 20, 60)
        a["l_shoulder"][0], a["r_shoulder"][0] = -swing, swing
    elif family == "raise":
        for s in ("l", "r") if rng.random() < 0.5 else (str(rng.choice(["l", "r"])),):
            if rng.random() < 0.5:
                a[f"{s}_shoulder"][0] = _u(rng, 70, 170)
            else:
                a[f"{s}_shoulder"][1] = _u(rng, 60, 160)
            a[f"{s}_elbow"][0] = _u(rng, 0, 120)
    elif family == "crouch":
        for s in ("l", "r"):
            a[f"{s}_hip"][0] = _u(rng, 50, 100)
            a[f"{s}_knee"][0] = a[f"{s}_hip"][0] + _u(rng, 0, 30)
            a[f"{s}_ankle"][0] = _u(rng, 5, 25)
        a["spine"][0] = _u(rng, 10, 28)
    elif family == "free":
        for joint in a:
            lim = LIMITS[_joint_kind(joint)]
            a[joint] = [_u(rng, *lim[0]) * 0.8, _u(rng, *lim[1]) * 0.8, _u(rng, *lim[2]) * 0.8]
    for s in ("l", "r"):
        grip = _u(rng, 0, 1) ** 1.5
        for finger in FINGERS:
            curl = grip * 80 + _u(rng, -10, 10)
            spread = _u(rng, -8, 8)
            for k in range(1, 4):
                a[f"{s}_{finger}{k}"] = [curl * (0.8 if k == 1 else 1.0), spread if k == 1 else 0.0, 0.0]
    for joint, v in a.items():
        lim = LIMITS[_joint_kind(joint)]
        a[joint] = [float(np.clip(v[i], lim[i][0], lim[i][1])) for i in range(3)]
    return {k: tuple(v) for k, v in a.items()}


def _joint_kind(joint: str) -> str:
    if any(f in joint for f in FINGERS):
        return "finger"
    return joint.split("_", 1)[-1] if joint[:2] in ("l_", "r_") else joint


def local_rotation(joint: str, angles: tuple[float, float, float]) -> np.ndarray:
    """Local rotation of ``joint`` from its (flex, abduction, twist) angles."""
    flex, abd, twist = angles
    sx = -1.0 if joint.startswith("r_") else 1.0
    kind = _joint_kind(joint)
    if kind in ("spine", "chest", "neck", "head"):
        return rot_y(twist) @ rot_z(abd) @ rot_x(flex)
    if kind == "shoulder":
        return rot_z(sx * abd) @ rot_x(-flex) @ rot_y(sx * twist)
    if kind == "elbow":
        return rot_x(-flex) @ rot_y(sx * twist)
    if kind == "wrist":
        return rot_z(-sx * flex) @ rot_x(-abd)
    if kind == "hip":
        return rot_z(sx * abd) @ rot_x(-flex) @ rot_y(-sx * twist)
    if kind == "knee":
        return rot_x(flex)
    if kind == "ankle":
        return rot_x(-flex)
    # fingers curl towards the palm (the palm of the left hand faces -x)
    return rot_x(abd) @ rot_z(-sx * flex)


def forward_kinematics(rig, pose: dict, root_rot: np.ndarray, root_pos: np.ndarray) -> dict:
    """Global joint frames: name -> (position (3,), rotation (3, 3))."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, parent, offset, rest in rig:
        local = rest @ local_rotation(name, pose[name]) if name in pose else rest
        if parent is None:
            out[name] = (root_pos.astype(np.float64), root_rot @ local)
        else:
            p_pos, p_rot = out[parent]
            out[name] = (p_pos + p_rot @ offset, p_rot @ local)
    return out
