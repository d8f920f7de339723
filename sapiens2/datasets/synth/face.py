"""A frontal face template that places every face keypoint of the 308 vocabulary on the head.

Coordinates are head-local (metres, canonical head): x = the subject's left, y = up, z = forward,
origin at the centre of the skull ellipsoid. The face is the union of a few axis-aligned
ellipsoids (skull, eyeballs, nose, lips, ears); a landmark given by its (x, y) position is put on
the front-most surface of that union, and ear landmarks on the outer side of the ear. The
placement is our own approximation of the named anatomy (the numbering of the "midpoint_k"
landmarks in the official vocabulary is not documented; we spread them deterministically along
their curve). Every face name must resolve, so a changed vocabulary fails loudly.
"""

from __future__ import annotations

import math
import re
from functools import cache

import numpy as np

SKULL = ((0.0, 0.0, 0.0), (0.075, 0.105, 0.092))
EYE_X, EYE_Y, EYE_R = 0.031, 0.008, 0.0125
IRIS_R, PUPIL_R = 0.0058, 0.0025
# (centre, radii) of the face parts other than the skull; centres' z are set in face_parts().
_PART_SHAPES = {
    "nose": ((0.0, -0.012), (0.011, 0.027, 0.016), 0.004),
    "upper_lip": ((0.0, -0.049), (0.024, 0.0065, 0.010), 0.004),
    "lower_lip": ((0.0, -0.061), (0.021, 0.0075, 0.010), 0.003),
}
EAR_RADII = (0.010, 0.030, 0.019)


def _skull_front_z(x: float, y: float) -> float:
    rx, ry, rz = SKULL[1]
    q = 1.0 - (x / rx) ** 2 - (y / ry) ** 2
    return rz * math.sqrt(max(q, 0.0))


@cache
def face_parts() -> dict:
    """Face-part ellipsoids in head-local coordinates: name -> (centre, radii)."""
    parts = {"skull": (np.array(SKULL[0]), np.array(SKULL[1]))}
    for side, sx in (("l", 1.0), ("r", -1.0)):
        z = _skull_front_z(sx * EYE_X, EYE_Y) - EYE_R + 0.0035
        parts[f"{side}_eye"] = (np.array([sx * EYE_X, EYE_Y, z]), np.array([EYE_R] * 3))
        ex = sx * (SKULL[1][0] - 0.004)
        parts[f"{side}_ear"] = (np.array([ex, 0.0, -0.008]), np.array(EAR_RADII))
    for name, ((x, y), radii, protrude) in _PART_SHAPES.items():
        z = _skull_front_z(x, y) - radii[2] + protrude
        if name == "nose":
            z = _skull_front_z(x, y) - radii[2] + 0.013
        parts[name] = (np.array([x, y, z]), np.array(radii))
    return parts


def _front_z(x: float, y: float) -> float:
    best = -np.inf
    for name, (c, r) in face_parts().items():
        if name.endswith("_ear"):
            continue
        q = 1.0 - ((x - c[0]) / r[0]) ** 2 - ((y - c[1]) / r[1]) ** 2
        if q >= 0:
            best = max(best, c[2] + r[2] * math.sqrt(q))
    return float(best)


def _on_front(x: float, y: float) -> tuple[float, float, float]:
    return (x, y, _front_z(x, y))


def _curve_t(tag: str) -> float:
    """Position along an open curve from its inner end (0) to its outer end (1)."""
    if "inner_end" in tag or "startpoint" in tag:
        return 0.0
    if "outer_end" in tag or tag == "end" or tag.startswith("end_of"):
        return 1.0
    if "center" in tag:
        return 0.5
    m = re.search(r"midpoint_(\d)", tag)
    if not m:
        raise KeyError(tag)
    k = int(m.group(1))
    return k / 8.0 if k <= 3 else 0.5 + (k - 3) / 8.0


def _eye_line(side: str, kind: str, t: float) -> tuple[float, float]:
    sx = 1.0 if side == "l" else -1.0
    x = sx * (EYE_X - 0.013 + 0.026 * t)
    bump = math.sin(math.pi * t)
    offsets = {
        "upper_lash_line": 0.0055,
        "upper_eyelid_line": 0.0085,
        "upper_crease_line": 0.0115,
        "lower_lash_line": -0.0045,
        "lower_eyelid_line": -0.0075,
    }
    return x, EYE_Y + offsets[kind] * bump


def _eyebrow(side: str, name: str) -> tuple[float, float]:
    sx = 1.0 if side == "l" else -1.0
    t = _curve_t(name)
    x = sx * (0.011 + 0.046 * t)
    y = 0.029 + 0.007 * math.sin(math.pi * min(t * 1.3, 1.0))
    y += 0.0025 if "upper" in name else -0.0025
    return x, y


def _ring(side: str, name: str, radius: float) -> tuple[float, float, float]:
    """Iris/pupil landmarks: centre, the clock positions 12/3/6/9 and the midpoints between."""
    sx = 1.0 if side == "l" else -1.0
    c, r = face_parts()[f"{side}_eye"]
    if "center" in name:
        ang, rr = 0.0, 0.0
    else:
        clock = {"3": 0.0, "12": 90.0, "9": 180.0, "6": 270.0}
        mid = {"1": 45.0, "4": 135.0, "3": 225.0, "2": 315.0}
        m = re.search(r"_(\d+)$", name)
        ang = mid[m.group(1)] if "midpoint" in name else clock[m.group(1)]
        rr = radius
    # 3 o'clock is on the image right of a frontal face, i.e. the subject's left (+x).
    x = c[0] + rr * math.cos(math.radians(ang))
    y = c[1] + rr * math.sin(math.radians(ang))
    del sx
    q = 1.0 - ((x - c[0]) ** 2 + (y - c[1]) ** 2) / r[0] ** 2
    return (x, y, c[2] + r[2] * math.sqrt(max(q, 0.0)))


# Ear landmarks in polar coordinates (angle deg: 0 = towards the face, 90 = up; radius fraction).
_EAR = {
    "top_end_of_inferior_crus": (60, 0.55),
    "top_end_of_superior_crus": (100, 0.72),
    "start_of_antihelix": (115, 0.55),
    "end_of_antihelix": (235, 0.55),
    "midpoint_1_of_antihelix": (145, 0.55),
    "midpoint_2_of_antihelix": (175, 0.55),
    "midpoint_3_of_antihelix": (205, 0.55),
    "midpoint_1_of_inferior_crus": (80, 0.45),
    "highest_point_of_antitragus": (250, 0.42),
    "bottom_point_of_tragus": (-40, 0.72),
    "protruding_point_of_tragus": (-22, 0.85),
    "top_point_of_tragus": (-5, 0.72),
    "start_point_of_crus_of_helix": (15, 0.35),
    "deepest_point_of_concha": (0, 0.0),
    "tip_of_ear_lobe": (270, 1.0),
    "midpoint_between_22_15": (285, 0.7),
    "bottom_connecting_point_of_ear_lobe": (300, 0.9),
    "top_connecting_point_of_helix": (40, 0.85),
}


def _ear(side: str, tag: str) -> tuple[float, float, float]:
    m = re.fullmatch(r"point_(\d)_of_inner_helix", tag)
    if m:
        ang, frac = 60.0 + (int(m.group(1)) - 1) * 190.0 / 7.0, 0.9
    else:
        ang, frac = _EAR[tag]
    c, r = face_parts()[f"{side}_ear"]
    z = c[2] + r[2] * frac * math.cos(math.radians(ang))
    y = c[1] + r[1] * frac * math.sin(math.radians(ang))
    q = 1.0 - ((y - c[1]) / r[1]) ** 2 - ((z - c[2]) / r[2]) ** 2
    sx = 1.0 if side == "l" else -1.0
    return (c[0] + sx * r[0] * math.sqrt(max(q, 0.0)), y, z)


_MOUTH_T = {1: 0.375, 2: 0.625, 3: 0.125, 4: 0.25, 5: 0.75, 6: 0.875}


def _lip(name: str) -> tuple[float, float]:
    upper = "upper" in name
    inner = "inner" in name
    m = re.search(r"midpoint_(\d)", name)
    t = _MOUTH_T[int(m.group(1))] if m else 0.5
    half = 0.019 if inner else 0.024
    x = -half + 2 * half * t  # t = 0 at the subject's right corner
    bump = math.sin(math.pi * t)
    if inner:
        y = -0.0545 + (0.0025 if upper else -0.0025) * bump
    else:
        y = -0.054 + (0.0095 if upper else -0.0125) * bump
    return x, y


def face_point(name: str) -> tuple[float, float, float]:
    """Head-local position of one face keypoint by its vocabulary name.

    Raises:
        KeyError: the name is not covered by the template.
    """
    fixed = {
        "center_of_glabella": (0.0, 0.030),
        "center_of_nose_root": (0.0, 0.014),
        "tip_of_nose_bridge": (0.0, -0.016),
        "midpoint_1_of_nose_bridge": (0.0, 0.0065),
        "midpoint_2_of_nose_bridge": (0.0, -0.001),
        "midpoint_3_of_nose_bridge": (0.0, -0.0085),
        "center_of_labiomental_groove": (0.0, -0.074),
        "tip_of_chin": (0.0, -0.092),
        "tip_of_nose": (0.0, -0.024),
        "bottom_center_of_nose": (0.0, -0.036),
        "r_outer_corner_of_nose": (-0.0125, -0.031),
        "l_outer_corner_of_nose": (0.0125, -0.031),
        "r_outer_corner_of_mouth": (-0.025, -0.054),
        "l_outer_corner_of_mouth": (0.025, -0.054),
        "r_inner_corner_of_mouth": (-0.019, -0.0545),
        "l_inner_corner_of_mouth": (0.019, -0.0545),
        "center_of_cupid_bow": (0.0, -0.0445),
        "center_of_lower_outer_lip": (0.0, -0.0665),
        "center_of_upper_inner_lip": (0.0, -0.052),
        "center_of_lower_inner_lip": (0.0, -0.057),
    }
    if name in fixed:
        return _on_front(*fixed[name])
    m = re.fullmatch(r"(inner|outer|upper)_corner_of_([lr])_nostril", name)
    if m:
        sx = 1.0 if m.group(2) == "l" else -1.0
        x, y = {"inner": (0.004, -0.035), "outer": (0.0105, -0.034), "upper": (0.0075, -0.030)}[m.group(1)]
        return _on_front(sx * x, y)
    if re.fullmatch(r"midpoint_\d_of_(upper|lower)_(outer|inner)_lip", name):
        return _on_front(*_lip(name))
    m = re.fullmatch(r"(.*)_of_([lr])_eyebrow", name)
    if m:
        return _on_front(*_eyebrow(m.group(2), m.group(1)))
    m = re.fullmatch(r"([lr])_(.*)_of_(upper|lower)_(lash|eyelid|crease)_line", name)
    if m:
        kind = f"{m.group(3)}_{m.group(4)}_line"
        return _on_front(*_eye_line(m.group(1), kind, _curve_t(m.group(2))))
    m = re.fullmatch(r"([lr])_(center|border)_of_(iris|pupil)(_.*)?", name)
    if m:
        return _ring(m.group(1), name, IRIS_R if m.group(3) == "iris" else PUPIL_R)
    m = re.fullmatch(r"([lr])_(.*)", name)
    if m and (m.group(2) in _EAR or re.fullmatch(r"point_\d_of_inner_helix", m.group(2))):
        return _ear(m.group(1), m.group(2))
    raise KeyError(f"face keypoint {name!r} is not covered by the synthetic face template")


@cache
def face_template(names: tuple[str, ...]) -> np.ndarray:
    """Head-local positions (N x 3) of the face keypoints ``names`` (canonical head size)."""
    return np.array([face_point(n) for n in names], dtype=np.float64)
