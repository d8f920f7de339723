"""Synthetic people: body shape, clothing, the primitives that make the body and its 308 keypoints.

A person is a list of capsules and ellipsoids hung on the skeleton of :mod:`.skeleton`. Each
primitive's ``tag`` carries the person index, the 29-class part label and albedo on either side
of a split along its axis (so a capsule can be half sleeve, half bare arm) and, for the eyes, the
gaze used to paint the iris. Keypoints come from the same joint frames, so they are exact.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from sapiens2.reference import keypoints308

from .face import face_parts, face_template
from .raycast import Capsule, Ellipsoid
from .skeleton import FINGERS, build_rig, forward_kinematics, rot_y, sample_pose

L = {  # seg_classes29 ids
    "bg": 0,
    "apparel": 1,
    "eyeglass": 2,
    "face": 3,
    "hair": 4,
    "lower_cloth": 13,
    "torso": 22,
    "upper_cloth": 23,
    "lower_lip": 24,
    "upper_lip": 25,
}
_SIDE_LABELS = {
    "l": {
        "foot": 5,
        "hand": 6,
        "lower_arm": 7,
        "lower_leg": 8,
        "shoe": 9,
        "sock": 10,
        "upper_arm": 11,
        "upper_leg": 12,
    },
    "r": {
        "foot": 14,
        "hand": 15,
        "lower_arm": 16,
        "lower_leg": 17,
        "shoe": 18,
        "sock": 19,
        "upper_arm": 20,
        "upper_leg": 21,
    },
}
SKIN_TONES = np.array(
    [
        [0.94, 0.78, 0.67],
        [0.88, 0.68, 0.55],
        [0.80, 0.60, 0.45],
        [0.68, 0.48, 0.34],
        [0.52, 0.35, 0.24],
        [0.36, 0.24, 0.16],
    ]
)
HAIR_COLOURS = np.array(
    [
        [0.08, 0.06, 0.05],
        [0.25, 0.15, 0.08],
        [0.55, 0.40, 0.22],
        [0.80, 0.66, 0.40],
        [0.50, 0.20, 0.08],
        [0.62, 0.62, 0.62],
    ]
)
HEAD_CENTRE = np.array([0.0, 0.082, 0.014])  # in the head joint frame, per unit head scale


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return np.array([(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i])


def sample_person(rng: np.random.Generator) -> dict:
    """Sample body shape, appearance and pose of one person."""
    skin = SKIN_TONES[rng.integers(len(SKIN_TONES))] * rng.uniform(0.93, 1.05, 3)
    shape = {
        "height": rng.uniform(0.86, 1.04),
        "shoulder": rng.uniform(0.85, 1.12),
        "hip": rng.uniform(0.85, 1.15),
        "hand": rng.uniform(0.9, 1.08),
        "girth": rng.uniform(0.85, 1.3),
        "limb": rng.uniform(0.85, 1.2),
        "head": rng.uniform(0.95, 1.08),
    }
    cloth = lambda: _hsv(rng.random(), rng.uniform(0.1, 0.85), rng.uniform(0.15, 0.95))  # noqa: E731
    look = {
        "skin": np.clip(skin, 0, 1),
        "hair": HAIR_COLOURS[rng.integers(len(HAIR_COLOURS))] * rng.uniform(0.85, 1.15),
        "hair_style": rng.choice(["short", "long", "bald", "bun"], p=[0.45, 0.35, 0.1, 0.1]),
        "top": rng.choice(["tshirt", "long", "tank", "none"], p=[0.45, 0.35, 0.15, 0.05]),
        "bottom": rng.choice(["trousers", "shorts"], p=[0.7, 0.3]),
        "top_col": cloth(),
        "bottom_col": cloth(),
        "shoe_col": cloth() * 0.7,
        "sock_col": cloth(),
        "iris": _hsv(rng.uniform(0.05, 0.6), rng.uniform(0.3, 0.8), rng.uniform(0.15, 0.5)),
        "glasses": rng.random() < 0.15,
        "hat": rng.random() < 0.12,
        "hat_col": cloth(),
        "barefoot": rng.random() < 0.07,
        "socks": rng.random() < 0.6,
    }
    return {"shape": shape, "look": look, "pose": sample_pose(rng)}


def _tag(pid, la, ca, lb=None, cb=None, split=2.0, **extra) -> dict:
    return {
        "person": pid,
        "labels": (la, la if lb is None else lb),
        "split": split,
        "colors": (np.clip(ca, 0, 1), np.clip(ca if cb is None else cb, 0, 1)),
        **extra,
    }


def pose_person(person: dict, yaw_deg: float, position: np.ndarray) -> dict:
    """Joint frames in world coordinates with the lowest point of the feet on the floor (y = 0)."""
    rig = build_rig(person["shape"])
    frames = forward_kinematics(rig, person["pose"], rot_y(yaw_deg), np.zeros(3))
    lowest = min(
        p[1] for _, (a, b, r) in _foot_segments(frames, person["shape"]).items() for p in (a - r, b - r)
    )
    shift = np.array([position[0], -lowest, position[2]])
    return {k: (p + shift, R) for k, (p, R) in frames.items()}


def _foot_segments(frames: dict, shape: dict) -> dict:
    out = {}
    h = shape["height"]
    for s, sx in (("l", 1.0), ("r", -1.0)):
        p, R = frames[f"{s}_ankle"]
        r = 0.036 * shape["limb"]
        heel = p + R @ (np.array([0.0, -0.052, -0.035]) * h)
        toe = p + R @ (np.array([sx * 0.012, -0.058, 0.145]) * h)
        out[s] = (heel, toe, np.array([0.0, r, 0.0]))
    return out


def build_primitives(person: dict, frames: dict, pid: int) -> list:
    """The capsules and ellipsoids of one posed person (world frame)."""
    sh, lk = person["shape"], person["look"]
    g, lm = sh["girth"], sh["limb"]
    skin, top, bot = lk["skin"], lk["top_col"], lk["bottom_col"]
    torso_label, torso_col = (L["torso"], skin) if lk["top"] == "none" else (L["upper_cloth"], top)
    P = lambda j: frames[j][0]  # noqa: E731
    R = lambda j: frames[j][1]  # noqa: E731
    prims: list = []

    def ell(joint, offset, radii, tag, rot=None):
        Rj = R(joint) if rot is None else R(joint) @ rot
        prims.append(Ellipsoid(P(joint) + R(joint) @ np.asarray(offset), Rj, np.asarray(radii, float), tag))

    ell(
        "pelvis",
        [0, -0.01, 0],
        np.array([0.155 * sh["hip"], 0.12, 0.105]) * [1, 1, g],
        _tag(pid, L["lower_cloth"], bot),
    )
    ell(
        "spine",
        [0, 0.07, 0.005],
        np.array([0.14, 0.15, 0.095]) * [g, 1, g],
        _tag(pid, L["lower_cloth"], bot, torso_label, torso_col, split=0.25),
    )
    ell(
        "chest",
        [0, 0.085, 0.0],
        np.array([0.16 * sh["shoulder"], 0.155, 0.105]) * [1, 1, g**0.5],
        _tag(pid, torso_label, torso_col),
    )
    prims.append(
        Capsule(
            P("l_shoulder") + R("chest") @ [0, 0.01, 0],
            P("r_shoulder") + R("chest") @ [0, 0.01, 0],
            0.058 * lm,
            _tag(pid, torso_label, torso_col),
        )
    )
    prims.append(
        Capsule(
            P("neck") - R("neck") @ [0, 0.03, 0],
            P("head") + R("head") @ [0, 0.02, -0.01],
            0.05 * lm,
            _tag(pid, L["face"], skin),
        )
    )
    for s in ("l", "r"):
        lab = {"l": _SIDE_LABELS["l"], "r": _SIDE_LABELS["r"]}[s]
        sleeve = {"tshirt": 0.45, "long": 2.0, "tank": -1.0, "none": -1.0}[lk["top"]]
        prims.append(
            Capsule(
                P(f"{s}_shoulder"),
                P(f"{s}_elbow"),
                0.047 * lm,
                _tag(pid, L["upper_cloth"], top, lab["upper_arm"], skin, split=sleeve),
            )
        )
        fore = L["upper_cloth"] if lk["top"] == "long" else lab["lower_arm"]
        prims.append(
            Capsule(
                P(f"{s}_elbow"),
                P(f"{s}_wrist"),
                0.037 * lm,
                _tag(
                    pid,
                    fore,
                    top if lk["top"] == "long" else skin,
                    lab["lower_arm"],
                    skin,
                    split=0.9 if lk["top"] == "long" else 2.0,
                ),
            )
        )
        shorts = lk["bottom"] == "shorts"
        prims.append(
            Capsule(
                P(f"{s}_hip"),
                P(f"{s}_knee"),
                0.072 * lm * g**0.5,
                _tag(pid, L["lower_cloth"], bot, lab["upper_leg"], skin, split=0.55 if shorts else 2.0),
            )
        )
        sock = lk["socks"] and not lk["barefoot"]
        shank_lab = lab["lower_leg"] if shorts else L["lower_cloth"]
        prims.append(
            Capsule(
                P(f"{s}_knee"),
                P(f"{s}_ankle"),
                0.052 * lm,
                _tag(
                    pid,
                    shank_lab,
                    skin if shorts else bot,
                    lab["sock"] if sock else shank_lab,
                    lk["sock_col"] if sock else (skin if shorts else bot),
                    split=0.78,
                ),
            )
        )
        heel, toe, rr = _foot_segments(frames, sh)[s]
        foot_lab, foot_col = (lab["foot"], skin) if lk["barefoot"] else (lab["shoe"], lk["shoe_col"])
        prims.append(Capsule(heel, toe, float(rr[1]), _tag(pid, foot_lab, foot_col)))
        # hand: palm + three capsules per finger
        ell(
            f"{s}_wrist",
            [0, -0.045 * sh["hand"], 0.002],
            np.array([0.016, 0.047, 0.042]) * sh["hand"],
            _tag(pid, lab["hand"], skin),
        )
        for finger in FINGERS:
            r = (0.0105 if finger == "thumb" else 0.0088) * sh["hand"]
            for k in range(1, 4):
                a, b = P(f"{s}_{finger}{k}"), P(f"{s}_{finger}{k + 1}")
                if k == 3:  # the tip keypoint lies on the surface of the distal capsule
                    b = b - (b - a) / max(np.linalg.norm(b - a), 1e-9) * r
                prims.append(Capsule(a, b, r, _tag(pid, lab["hand"], skin)))
    prims += _head_primitives(person, frames, pid)
    return prims


def head_frame(person: dict, frames: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """(centre, rotation, scale) of the head-local frame used by the face template."""
    p, Rh = frames["head"]
    hs = person["shape"]["head"]
    return p + Rh @ (HEAD_CENTRE * hs), Rh, hs


def _head_primitives(person: dict, frames: dict, pid: int) -> list:
    lk = person["look"]
    c, Rh, hs = head_frame(person, frames)
    skin = lk["skin"]
    out: list = []
    lip_col = skin * np.array([0.95, 0.68, 0.68])
    for name, (pc, radii) in face_parts().items():
        centre, r = c + Rh @ (pc * hs), radii * hs
        if name.endswith("_eye"):
            tag = _tag(
                pid,
                L["face"],
                np.array([0.88, 0.86, 0.84]),
                pattern="eye",
                gaze=Rh[:, 2].copy(),
                iris=lk["iris"],
                centre=centre,
                eye_r=float(r[0]),
            )
        elif name == "upper_lip":
            tag = _tag(pid, L["upper_lip"], lip_col)
        elif name == "lower_lip":
            tag = _tag(pid, L["lower_lip"], lip_col)
        else:
            tag = _tag(pid, L["face"], skin * (0.97 if name.endswith("_ear") else 1.0))
        out.append(Ellipsoid(centre, Rh, r, tag))
    style = lk["hair_style"]
    hair = _tag(pid, L["hair"], lk["hair"])
    if style != "bald":
        out.append(
            Ellipsoid(
                c + Rh @ (np.array([0, 0.018, -0.014]) * hs), Rh, np.array([0.079, 0.097, 0.092]) * hs, hair
            )
        )
    if style == "long":
        out.append(
            Ellipsoid(
                c + Rh @ (np.array([0, -0.045, -0.04]) * hs), Rh, np.array([0.085, 0.12, 0.06]) * hs, hair
            )
        )
    if style == "bun":
        out.append(
            Ellipsoid(c + Rh @ (np.array([0, 0.07, -0.07]) * hs), Rh, np.array([0.035] * 3) * hs, hair)
        )
    if lk["hat"]:
        hat = _tag(pid, L["apparel"], lk["hat_col"])
        out.append(
            Ellipsoid(
                c + Rh @ (np.array([0, 0.045, -0.005]) * hs), Rh, np.array([0.088, 0.075, 0.1]) * hs, hat
            )
        )
        out.append(
            Ellipsoid(c + Rh @ (np.array([0, 0.035, 0.02]) * hs), Rh, np.array([0.12, 0.008, 0.14]) * hs, hat)
        )
    if lk["glasses"]:
        g = _tag(pid, L["eyeglass"], np.array([0.05, 0.05, 0.06]))
        for sx in (1.0, -1.0):
            ec, er = face_parts()["l_eye" if sx > 0 else "r_eye"]
            lens = ec + np.array([0, 0, er[2] + 0.006])
            out.append(Ellipsoid(c + Rh @ (lens * hs), Rh, np.array([0.019, 0.014, 0.0025]) * hs, g))
            out.append(
                Capsule(
                    c + Rh @ (np.array([sx * 0.05, ec[1], lens[2] - 0.004]) * hs),
                    c + Rh @ (np.array([sx * 0.077, ec[1], -0.03]) * hs),
                    0.0025 * hs,
                    g,
                )
            )
        br = np.array([0.0, face_parts()["l_eye"][0][1] + 0.004, face_parts()["l_eye"][0][2] + 0.018])
        out.append(
            Capsule(
                c + Rh @ ((br + [0.012, 0, 0]) * hs), c + Rh @ ((br - [0.012, 0, 0]) * hs), 0.0025 * hs, g
            )
        )
    return out


@cache
def _vocab() -> tuple[tuple[str, ...], tuple[int, ...]]:
    kp = keypoints308()
    names = tuple(k["name"] for k in kp["keypoints"])
    return names, tuple(kp["parts"]["face"])


def person_keypoints(person: dict, frames: dict) -> tuple[np.ndarray, np.ndarray]:
    """World positions (308 x 3) of the vocabulary's keypoints and the depth slack of each.

    The slack is how far behind the visible surface a keypoint may lie and still count as
    visible: the radius of the limb for joint centres, a few millimetres for surface points.
    """
    names, face_ids = _vocab()
    sh = person["shape"]
    pos = np.zeros((len(names), 3))
    slack = np.full(len(names), 0.006)
    P = lambda j: frames[j][0]  # noqa: E731
    R = lambda j: frames[j][1]  # noqa: E731
    c, Rh, hs = head_frame(person, frames)
    face = c + (face_template(tuple(names[i] for i in face_ids)) * hs) @ Rh.T
    index = {n: i for i, n in enumerate(names)}
    pos[list(face_ids)] = face
    full = {"l": "left", "r": "right"}
    lm = sh["limb"]
    for s, side in full.items():
        sx = 1.0 if s == "l" else -1.0
        joints = {
            "shoulder": (P(f"{s}_shoulder") - R("chest") @ [0, 0.02, 0], 0.05 * lm),
            "elbow": (P(f"{s}_elbow"), 0.04 * lm),
            "hip": (P(f"{s}_hip"), 0.075 * lm),
            "knee": (P(f"{s}_knee"), 0.055 * lm),
            "ankle": (P(f"{s}_ankle"), 0.045 * lm),
            "wrist": (P(f"{s}_wrist"), 0.03 * lm),
        }
        for j, (p, r) in joints.items():
            pos[index[f"{side}_{j}"]] = p
            slack[index[f"{side}_{j}"]] = r
        heel, toe, rr = _foot_segments(frames, sh)[s]
        fwd = (toe - heel) / np.linalg.norm(toe - heel)
        out = R(f"{s}_ankle")[:, 0] * sx
        r = float(rr[1])
        pos[index[f"{side}_heel"]] = heel - fwd * r
        pos[index[f"{side}_big_toe"]] = toe + fwd * r * 0.8 - out * r * 0.5
        pos[index[f"{side}_small_toe"]] = toe - fwd * r * 0.6 + out * r * 0.8
        up_arm = R(f"{s}_shoulder")
        pos[index[f"{side}_olecranon"]] = P(f"{s}_elbow") - up_arm[:, 2] * 0.04 * lm
        pos[index[f"{side}_cubital_fossa"]] = P(f"{s}_elbow") + up_arm[:, 2] * 0.034 * lm
        pos[index[f"{side}_acromion"]] = P(f"{s}_shoulder") + R("chest") @ [sx * 0.01, 0.055 * lm, 0]
        for finger in FINGERS:
            for k in range(1, 5):
                key = f"{side}_{finger}{k}" if k > 1 else f"{side}_{finger}_third_joint"
                pos[index[key]] = P(f"{s}_{finger}{k}")
                slack[index[key]] = 0.012
        ear_ids = [index[n] for n in names if n.startswith(f"{s}_") and "concha" in n]
        pos[index[f"{side}_ear"]] = pos[ear_ids[0]]
        pos[index[f"{side}_eye"]] = pos[index[f"{s}_center_of_iris"]]
    pos[index["nose"]] = pos[index["tip_of_nose"]]
    pos[index["neck"]] = P("neck")
    slack[index["neck"]] = 0.06 * lm
    for n in ("left_acromion", "right_acromion", "left_olecranon", "right_olecranon"):
        slack[index[n]] = 0.01
    return pos, slack
