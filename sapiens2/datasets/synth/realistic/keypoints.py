"""The 308 Sapiens2 keypoints of an anny body, read from the table ``sapiens2/data/anny_keypoints308.json``.

Each table entry says how its point is found on a posed body: ``joint`` (a rig bone's head: an
interior joint centre), ``vertex`` (one mesh vertex: a surface point), ``barycentric`` (a point on one
triangle), ``vertex_mean`` (the mean of a vertex ring: an interior centre such as the eyeball's) or
``eye_ring`` (a point of the iris or pupil rim the generator adds to the eyeball, see :mod:`.eyes`),
``anny_coco`` (anny's own COCO keypoint regressor, a fixed blend of body vertices shipped with anny:
``anny.keypoints.KeypointsRegressor.coco``, the body model's placement of COCO's annotated points) or
``undefined`` (the mesh cannot define it; the reason is in the table; such a point is unlabelled).
The table is built by ``scripts/build_anny_keypoint_table.py`` from anatomical rules on anny's rest
mesh; the rule and the chosen vertices are documented in each entry.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from sapiens2.reference import DATA_DIR, keypoints308

from .bodies import PosedBody, anny_model, bone_index, faces
from .eyes import ring_points

TABLE_NAME = "anny_keypoints308.json"
RULES = ("joint", "vertex", "barycentric", "vertex_mean", "eye_ring", "anny_coco", "undefined")


@functools.cache
def keypoint_table() -> list[dict]:
    """The 308 entries of the table, checked against the keypoints308 vocabulary."""
    path = DATA_DIR / TABLE_NAME
    table = json.loads(path.read_text(encoding="utf-8"))
    entries = table["keypoints"]
    names = [k["name"] for k in keypoints308()["keypoints"]]
    if [e["name"] for e in entries] != names:
        raise ValueError(f"{path}: the keypoint names/order differ from keypoints308 "
                         f"({len(entries)} entries, expected {len(names)})")
    index = bone_index()
    n_vertices = int(faces().max()) + 1
    for i, e in enumerate(entries):
        where = f"{path}: keypoint {i} ({e['name']})"
        if e["rule"] not in RULES:
            raise ValueError(f"{where} has rule {e['rule']!r}, expected one of {RULES}")
        if e["rule"] == "joint" and e["bone"] not in index:
            raise ValueError(f"{where} names bone {e['bone']!r}, absent from anny's rig")
        if e["rule"] == "anny_coco" and e["label"] not in coco_regressor():
            raise ValueError(f"{where} names anny COCO label {e['label']!r}, expected one of "
                             f"{sorted(coco_regressor())}")
        for v in e.get("vertices", []):
            if not 0 <= v < n_vertices:
                raise ValueError(f"{where} names vertex {v}, outside [0, {n_vertices})")
    return entries


@functools.cache
def coco_regressor() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """anny's COCO keypoint regressor: label -> (vertex ids, weights summing to 1) of the body mesh."""
    from anny.keypoints import KeypointsRegressor

    regressor = KeypointsRegressor.coco(anny_model())
    weights = regressor.regression_weights.detach().cpu().numpy().astype(np.float64)
    out = {}
    for label, w in zip(regressor.labels, weights):
        ids = np.flatnonzero(w)
        out[label] = (ids, w[ids] / w[ids].sum())
    return out


@functools.cache
def _compiled() -> tuple[np.ndarray, ...]:
    """The table as arrays: joint bone, vertex ids, weights, defined, surface, normal offset per point."""
    entries = keypoint_table()
    n = len(entries)
    bone = np.full(n, -1, dtype=np.int64)
    blends = {i: coco_regressor()[e["label"]] for i, e in enumerate(entries) if e["rule"] == "anny_coco"}
    width = max([len(e.get("vertices", [])) for e in entries] + [len(b[0]) for b in blends.values()] + [1])
    verts = np.zeros((n, width), dtype=np.int64)
    weights = np.zeros((n, width), dtype=np.float64)
    defined = np.zeros(n, dtype=bool)
    surface = np.zeros(n, dtype=bool)
    offset = np.zeros(n, dtype=np.float64)
    index = bone_index()
    for i, e in enumerate(entries):
        rule = e["rule"]
        if rule == "undefined":
            continue
        defined[i] = True
        surface[i] = bool(e["surface"])
        if rule == "joint":
            bone[i] = index[e["bone"]]
            continue
        if rule == "eye_ring":
            continue
        if rule == "anny_coco":
            ids, w = blends[i]
            verts[i, : len(ids)] = ids
            weights[i, : len(ids)] = w
            continue
        ids = e["vertices"]
        w = e.get("weights") or [1.0 / len(ids)] * len(ids)
        verts[i, : len(ids)] = ids
        weights[i, : len(ids)] = w
        offset[i] = float(e.get("normal_offset", 0.0))
    return bone, verts, weights, defined, surface, offset


def _triangle_normals(vertices: np.ndarray, tris: np.ndarray) -> np.ndarray:
    n = np.cross(vertices[tris[:, 1]] - vertices[tris[:, 0]], vertices[tris[:, 2]] - vertices[tris[:, 0]])
    return n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-15)


def body_keypoints(body: PosedBody) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 308 keypoints of one posed body (before its clothes: they do not move keypoints).

    Returns:
        (308, 3) world positions (zeros where undefined), (308,) defined, (308,) on-surface flags.
    """
    bone, verts, weights, defined, surface, offset = _compiled()
    points = np.einsum("kw,kwd->kd", weights, body.vertices[verts])
    lifted = np.flatnonzero(offset)
    if len(lifted):  # points on a layer above the skin (the eyebrow ribbon): along their triangle's normal
        points[lifted] += offset[lifted, None] * _triangle_normals(body.vertices, verts[lifted, :3])
    is_joint = bone >= 0
    points[is_joint] = body.bone_heads[bone[is_joint]]
    for i, e in enumerate(keypoint_table()):
        if e["rule"] == "eye_ring":
            angle = 0.0 if e["angle_deg"] is None else e["angle_deg"]
            fraction = 0.0 if e["angle_deg"] is None else None
            points[i] = ring_points(body, e["eye"], e["ring"], np.array([angle]), fraction=fraction)[0]
    points[~defined] = 0.0
    return points, defined.copy(), surface.copy()



@functools.cache
def _eyebrow_table() -> dict:
    return json.loads((DATA_DIR / TABLE_NAME).read_text(encoding="utf-8"))["eyebrows"]


def eyebrow_ribbon(body: PosedBody, side: str) -> tuple[np.ndarray, np.ndarray]:
    """The generator's eyebrow on one side ("L"/"R"): posed ribbon vertices and triangles.

    The ribbon's points are barycentric points of body triangles lifted along the triangle normal, the
    same construction as the eyebrow keypoints, so the drawn brow and its points agree.
    """
    brow = _eyebrow_table()[side]
    ids = np.asarray(brow["vertices"], dtype=np.int64)
    w = np.asarray(brow["weights"], dtype=np.float64)
    lift = brow["lift"] * _triangle_normals(body.vertices, ids)
    verts = np.einsum("kw,kwd->kd", w, body.vertices[ids]) + lift
    n_t, n_s = brow["grid"]
    tris = []
    for i in range(n_t - 1):
        for j in range(n_s - 1):
            a, b = i * n_s + j, (i + 1) * n_s + j
            tris += [[a, b, b + 1], [a, b + 1, a + 1]]
    return verts, np.asarray(tris, dtype=np.int64)
