"""Render a realistic scene: exact per-pixel ground truth from one AOV pass, and the image.

Ground truth: one ray through each pixel centre (Mitsuba's ``stratified`` sampler, one sample, no
jitter, box filter) with the ``aov`` integrator returns albedo, shading normal, position, depth,
shape and triangle index of the first hit. Shape + triangle index give the 29-class label through
the mesh's ``face_class``; position and normal go to the camera frame. The image is a second pass
of the same scene with lights: ``fast`` (shaded in NumPy from the ground-truth pass) or ``path`` (the
path tracer, ``spp`` samples). Keypoints are projected with K and depth-tested against the first-hit
depth of every surface (occluders included); an interior joint is tested at the skin that covers it
on the camera's side (:func:`project_keypoints`).
"""

from __future__ import annotations

import numpy as np

from .camera import mitsuba_sensor
from .scene import RealisticScene, mitsuba_scene
from .shading import shade_fast

MODES = ("fast", "path")
SURFACE_MARGIN = 0.03  # metres: a surface keypoint is visible if nothing is this much in front of it
# metres the skin covering an interior joint on the camera's side may lie beyond the joint's nearest
# skin before the person's own body counts as hiding it. A limb is not round and a joint centre is
# off its middle: on anny bodies seen from the open side that skin lies 0-8 cm beyond the nearest
# one (a frontal hip 7 cm from its nearest skin and 14 cm from the front; an elbow or wrist behind
# the forearm or thumb 5-6 cm), while a joint seen through the trunk (the far shoulder or hip of a
# turned body) has it 12-30 cm beyond
SELF_DEPTH = 0.10
_AOVS = "alb:albedo,nrm:sh_normal,pos:position,dep:depth,shp:shape_index,tri:prim_index"
_CENTRE_SAMPLER = {"type": "stratified", "sample_count": 1, "jitter": False}
PATH_MAX_DEPTH = 6


def render_ground_truth(scene: RealisticScene, mi) -> dict:
    """Every pixel's first hit, as the split's dense ground truth plus the full depth buffer.

    Returns:
        dict with ``label`` (H x W uint8), ``mask`` (H x W bool, person pixels), ``normal`` and
        ``pointmap`` (H x W x 3 float32, camera frame, zero off-person), ``albedo`` (H x W x 3 uint8,
        zero off-person), ``owner`` (H x W int, person index or -1), ``zbuffer`` (H x W float64:
        camera-frame z of the first surface of any kind, inf where no surface), ``mesh_index``
        (H x W int, index into ``scene.meshes`` or -1), ``surface_albedo`` and ``surface_normal``
        (H x W x 3 float64, every surface's albedo and camera-frame normal, zero where none).
    """
    cam = scene.camera
    h, w = cam.hw
    sensor = mitsuba_sensor(cam, mi, _CENTRE_SAMPLER)
    mis = mitsuba_scene(scene, mi, sensor, {"type": "aov", "aovs": _AOVS}, lights=False)
    raw = np.asarray(mi.render(mis, spp=1), dtype=np.float64)
    if raw.shape != (h, w, 12):
        raise RuntimeError(f"mitsuba AOV pass returned shape {raw.shape}, expected {(h, w, 12)}")
    alb, nrm, pos = raw[..., 0:3], raw[..., 3:6], raw[..., 6:9]
    hit = raw[..., 9] > 0
    shape_of = _shape_order(mis)
    shp = np.where(hit, np.rint(raw[..., 10]).astype(np.int64) - 1, 0)  # the AOV counts shapes from 1
    if hit.any() and (shp[hit].min() < 0 or shp[hit].max() >= len(shape_of)):
        raise RuntimeError(f"mitsuba AOV shape index outside 1..{len(shape_of)}")
    mesh_index = np.where(hit, shape_of[shp], -1)
    tri = np.where(hit, np.rint(raw[..., 11]).astype(np.int64), 0)
    R, t = cam.world_to_cam[:3, :3], cam.world_to_cam[:3, 3]
    p_cam = pos @ R.T + t
    n_cam = nrm @ R.T
    n_cam /= np.maximum(np.linalg.norm(n_cam, axis=-1, keepdims=True), 1e-12)
    facing_away = np.sum(n_cam * p_cam, axis=-1) > 0  # seen from behind (two-sided surfaces): flip
    n_cam[facing_away] *= -1
    person_of = np.array([m.person for m in scene.meshes] + [-1])
    owner = person_of[np.where(hit, mesh_index, len(scene.meshes))]
    human = hit & (owner >= 0)
    label = np.zeros((h, w), np.uint8)
    for k, m in enumerate(scene.meshes):
        if m.person < 0:
            continue
        sel = mesh_index == k
        label[sel] = m.face_class[tri[sel]]
    albedo_q = np.round(np.clip(alb, 0, 1) * 255).astype(np.uint8)
    return {
        "label": np.where(human, label, 0).astype(np.uint8),
        "mask": human,
        "normal": np.where(human[..., None], n_cam, 0).astype(np.float32),
        "pointmap": np.where(human[..., None], p_cam, 0).astype(np.float32),
        "albedo": np.where(human[..., None], albedo_q, 0).astype(np.uint8),
        "owner": np.where(hit, owner, -1),
        "zbuffer": np.where(hit, p_cam[..., 2], np.inf),
        "mesh_index": mesh_index,
        "surface_albedo": np.where(hit[..., None], np.clip(alb, 0, 1), 0.0),
        "surface_normal": np.where(hit[..., None], n_cam, 0.0),
    }


def _shape_order(mis) -> np.ndarray:
    """Map the AOV's shape index (1 + the position in ``scene.shapes()``) to our mesh index (``shapeNNN``)."""
    order = np.full(len(mis.shapes()), -1, np.int64)
    for k, shape in enumerate(mis.shapes()):
        name = shape.id()
        if name.startswith("shape") and name[5:].isdigit():
            order[k] = int(name[5:])
    return order


def render_image(scene: RealisticScene, mi, mode: str = "fast", spp: int = 16, seed: int = 0,
                 gt: dict | None = None) -> np.ndarray:
    """The lit image (H x W x 3 uint8, sRGB) of the scene.

    Args:
        scene: the scene.
        mi: mitsuba with its variant set.
        mode: ``fast`` (shaded from the ground-truth pass: environment irradiance and the lights,
            no shadows or inter-reflection, :mod:`.shading`) or ``path`` (Mitsuba's path tracer, up
            to :data:`PATH_MAX_DEPTH` bounces, ``spp`` samples per pixel).
        spp: samples per pixel of ``path``.
        seed: the sampler (and sensor-noise) seed: deterministic for a seed on one machine.
        gt: the scene's :func:`render_ground_truth` (``fast`` shades it; rendered when None).
    """
    if mode not in MODES:
        raise ValueError(f"unknown render mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "fast":
        return tonemap(shade_fast(scene, gt if gt is not None else render_ground_truth(scene, mi), seed))
    integrator, n = {"type": "path", "max_depth": PATH_MAX_DEPTH}, int(spp)
    sensor = mitsuba_sensor(scene.camera, mi, {"type": "independent", "sample_count": n},
                            {"rfilter": {"type": "gaussian"}})
    mis = mitsuba_scene(scene, mi, sensor, integrator, lights=True)
    linear = np.asarray(mi.render(mis, spp=n, seed=int(seed) % (2**32)), dtype=np.float64)[..., :3]
    return tonemap(linear)


def tonemap(linear: np.ndarray) -> np.ndarray:
    """Linear radiance to 8-bit sRGB, exposed so the 97th percentile of luminance is near white."""
    lum = linear @ np.array([0.2126, 0.7152, 0.0722])
    ref = float(np.percentile(lum, 97)) if np.isfinite(lum).all() else 1.0
    x = np.clip(np.nan_to_num(linear) * (0.9 / max(ref, 1e-6)), 0, 1)
    srgb = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    return np.round(srgb * 255).astype(np.uint8)


def project_keypoints(scene: RealisticScene, gt: dict) -> list[np.ndarray]:
    """Each person's keypoints (308 x 3: x, y, visibility) in the image.

    Visibility: 0 for a keypoint the mesh does not define or that falls outside the image (x = y
    = 0 then); otherwise 2 when it is seen, else 1. A point on the skin is seen when no surface at
    its pixel lies more than :data:`SURFACE_MARGIN` in front of it. An interior joint is seen
    through the skin that covers it: follow the ray from the joint towards the camera to where it
    leaves the person's own mesh; the joint is seen when that exit lies at most :data:`SELF_DEPTH`
    beyond the joint's nearest vertex (else the person's own body hides it) and no surface at its
    pixel lies more than :data:`SURFACE_MARGIN` in front of the exit (clothes and hair are within
    it; another limb, person or object is not).
    """
    cam = scene.camera
    h, w = cam.hw
    eye = cam.centre()
    out = []
    for k, person in enumerate(scene.people):
        kp_cam = cam.to_camera(person.world)
        uv = cam.project(kp_cam)
        z = kp_cam[:, 2]
        inside = (person.defined & (z > 0) & np.isfinite(uv).all(1)
                  & (uv[:, 0] >= -0.5) & (uv[:, 0] < w - 0.5) & (uv[:, 1] >= -0.5) & (uv[:, 1] < h - 0.5))
        ui = np.clip(np.rint(np.nan_to_num(uv[:, 0])).astype(int), 0, w - 1)
        vi = np.clip(np.rint(np.nan_to_num(uv[:, 1])).astype(int), 0, h - 1)
        cover_z = z.copy()  # camera depth of the surface that should be the first one seen at the point
        self_hidden = np.zeros(len(z), bool)
        interior = np.flatnonzero(inside & ~person.surface)
        if len(interior):
            mesh = scene.meshes[k]
            points = person.world[interior]
            exit_t = exit_distances(points, eye, mesh.vertices, mesh.faces)
            self_hidden[interior] = exit_t > _nearest_distance(points, mesh.vertices) + SELF_DEPTH
            towards = (eye - points) / np.linalg.norm(eye - points, axis=1, keepdims=True)
            cover_z[interior] = cam.to_camera(points + exit_t[:, None] * towards)[:, 2]
        visible = inside & ~self_hidden & (gt["zbuffer"][vi, ui] >= cover_z - SURFACE_MARGIN)
        vis = np.where(visible, 2, np.where(inside, 1, 0))
        out.append(np.stack([np.where(inside, uv[:, 0], 0.0), np.where(inside, uv[:, 1], 0.0), vis], 1))
    return out


def exit_distances(points: np.ndarray, eye: np.ndarray, vertices: np.ndarray,
                   faces: np.ndarray) -> np.ndarray:
    """Distance from each point along the ray towards ``eye`` to the first triangle it crosses.

    Möller-Trumbore against every triangle (both sides: the ray leaves a closed mesh through a
    triangle's back). A point with no triangle between it and the eye gets 0 (it is outside the mesh
    on the camera's side).
    """
    a = vertices[faces[:, 0]]
    e1 = vertices[faces[:, 1]] - a
    e2 = vertices[faces[:, 2]] - a
    out = np.zeros(len(points))
    for i, p in enumerate(points):
        length = float(np.linalg.norm(eye - p))
        d = (eye - p) / length
        pv = np.cross(d, e2)
        det = np.einsum("fd,fd->f", e1, pv)
        ok = np.abs(det) > 1e-12
        inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
        s = p - a
        u = np.einsum("fd,fd->f", s, pv) * inv
        q = np.cross(s, e1)
        v = (q @ d) * inv
        t = np.einsum("fd,fd->f", e2, q) * inv
        hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 1e-6) & (t < length)
        out[i] = float(t[hit].min()) if hit.any() else 0.0
    return out


def _nearest_distance(points: np.ndarray, verts: np.ndarray) -> np.ndarray:
    """Distance from each point to its nearest vertex."""
    from scipy.spatial import cKDTree

    return cKDTree(verts).query(points)[0]


def render_all(scene: RealisticScene, mi, mode: str = "fast", spp: int = 16, seed: int = 0) -> dict:
    """Image, ground truth and keypoints of one scene, with ``synth_sample``'s keys (and the extras).

    Returns:
        :func:`render_ground_truth`'s dict plus ``image``, ``K`` and ``people`` (list of
        ``keypoints`` (308 x 3), ``bbox`` xywh, ``area``; people with no visible pixel left out).
    """
    gt = render_ground_truth(scene, mi)
    gt["image"] = render_image(scene, mi, mode, spp, seed, gt)
    gt["K"] = scene.camera.K.copy()
    people = []
    for k, kp in enumerate(project_keypoints(scene, gt)):
        inst = gt["owner"] == k
        area = int(inst.sum())
        if area == 0:
            continue
        ys, xs = np.nonzero(inst)
        bbox = [float(xs.min()), float(ys.min()),
                float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]
        people.append({"keypoints": kp, "bbox": bbox, "area": area, "person": k})
    gt["people"] = people
    return gt
