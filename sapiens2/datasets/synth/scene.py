"""One synthetic scene: people, occluding objects, camera, lights; rendered to every ground truth.

:func:`render_scene` returns the image and, from the same ray casts, the part labels, camera-frame
normals, the pointmap and intrinsics, the albedo, the human mask and per-person keypoints with
visibility from a depth test. Determinism: everything derives from one ``numpy`` Generator.
"""

from __future__ import annotations

import math

import numpy as np

from .body import build_primitives, person_keypoints, pose_person, sample_person
from .raycast import Capsule, Ellipsoid, render

VIS_MARGIN = 0.012  # metres of extra depth slack in the keypoint visibility test


def _look_at(cam: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera rotation (rows: right, down, forward) for an OpenCV camera."""
    f = target - cam
    f /= np.linalg.norm(f)
    right = np.cross(f, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(f, right)
    return np.stack([right, down, f])


def _to_camera(prim, R: np.ndarray, C: np.ndarray):
    if isinstance(prim, Capsule):
        return Capsule(R @ (prim.a - C), R @ (prim.b - C), prim.radius, prim.tag)
    tag = dict(prim.tag)
    if "gaze" in tag:
        tag["gaze"], tag["centre"] = R @ tag["gaze"], R @ (tag["centre"] - C)
    return Ellipsoid(R @ (prim.center - C), R @ prim.rot, prim.radii, tag)


def _objects(rng: np.random.Generator, anchor: np.ndarray, cam: np.ndarray) -> list:
    """0-2 occluders (poles, balls, boxes) between the camera and the person at ``anchor``."""
    out = []
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        t = rng.uniform(0.25, 0.7)
        base = anchor + (cam - anchor) * t * np.array([1, 0, 1]) + [rng.uniform(-0.5, 0.5), 0, 0]
        col = rng.uniform(0.1, 0.9, 3)
        tag = {"person": -1, "labels": (0, 0), "split": 2.0, "colors": (col, col)}
        kind = rng.choice(["pole", "ball", "box"])
        if kind == "pole":
            out.append(
                Capsule(
                    base + [0, -0.2, 0], base + [0, rng.uniform(0.6, 2.2), 0], rng.uniform(0.03, 0.09), tag
                )
            )
        elif kind == "ball":
            r = rng.uniform(0.1, 0.25)
            out.append(Ellipsoid(base + [0, rng.uniform(r, 1.4), 0], np.eye(3), np.array([r] * 3), tag))
        else:
            rad = np.array([rng.uniform(0.2, 0.5), rng.uniform(0.2, 0.5), rng.uniform(0.15, 0.3)])
            out.append(Ellipsoid(base + [0, rad[1] * 0.8, 0], np.eye(3), rad, tag))
    return out


def sample_scene(rng: np.random.Generator, hw: tuple[int, int]) -> dict:
    """Sample people, objects, camera and lights for an image of size ``hw`` = (H, W)."""
    h, w = hw
    n_people = 1 if rng.random() < 0.55 else 2
    people = []
    for i in range(n_people):
        person = sample_person(rng)
        front = rng.random() < 0.65
        yaw = rng.uniform(-60, 60) if front else rng.uniform(-180, 180)
        pos = (
            np.zeros(3)
            if i == 0
            else np.array([rng.choice([-1, 1]) * rng.uniform(0.35, 0.9), 0, rng.uniform(-1.2, 0.4)])
        )
        people.append((person, yaw, pos))
    fov = math.radians(rng.uniform(35, 60))
    f = 0.5 * h / math.tan(0.5 * fov)
    K = np.array(
        [
            [f, 0, w / 2 - 0.5 + rng.normal(0, 0.01 * w)],
            [0, f, h / 2 - 0.5 + rng.normal(0, 0.01 * h)],
            [0, 0, 1],
        ]
    )
    frac = rng.uniform(0.6, 1.0)
    height = 1.75 * people[0][0]["shape"]["height"]
    dist = f * height / (frac * h) + 0.15
    azim = math.radians(rng.uniform(-25, 25))
    cam = np.array([dist * math.sin(azim), rng.uniform(0.5, 1.9), dist * math.cos(azim)])
    target = np.array([rng.normal(0, 0.08), height * rng.uniform(0.45, 0.6), 0])
    lights = []
    for _ in range(rng.integers(1, 3)):
        d = np.array([rng.uniform(-1, 1), rng.uniform(-1, -0.2), rng.uniform(-1, -0.3)])
        lights.append((d / np.linalg.norm(d), rng.uniform(0.5, 0.9) * rng.uniform(0.85, 1.0, 3)))
    return {
        "people": people,
        "K": K,
        "cam": cam,
        "target": target,
        "lights": lights,
        "ambient": rng.uniform(0.25, 0.45),
        "objects": _objects(rng, np.zeros(3), cam),
        "floor": (rng.uniform(0.2, 0.8, 3), rng.uniform(0.2, 0.8, 3), rng.uniform(0.2, 0.6)),
        "wall": (
            rng.uniform(0.2, 0.9, 3),
            rng.uniform(0.2, 0.9, 3),
            rng.uniform(-3.5, -1.8),
            rng.integers(3),
        ),
        "noise": rng.uniform(0.004, 0.02),
        "noise_seed": int(rng.integers(2**31)),
    }


def _background(rays: np.ndarray, R: np.ndarray, C: np.ndarray, sc: dict) -> tuple[np.ndarray, np.ndarray]:
    """Albedo-times-light of the floor (y = 0) and back wall, and their ray distances."""
    h, w, _ = rays.shape
    d_world = rays @ R  # camera-frame rays to world directions
    img = np.zeros((h, w, 3))
    dist = np.full((h, w), np.inf)
    a1, a2, zwall = sc["wall"][0], sc["wall"][1], sc["wall"][2]
    t_wall = (zwall - C[2]) / np.where(np.abs(d_world[..., 2]) > 1e-9, d_world[..., 2], -1e-9)
    hit = t_wall > 0
    pw = C + d_world * np.where(hit, t_wall, 0)[..., None]
    style = sc["wall"][3]
    if style == 0:
        mix = 0.5 + 0.5 * np.sin(pw[..., 0] * 6.0)
    elif style == 1:
        mix = ((np.floor(pw[..., 0] * 2) + np.floor(pw[..., 1] * 2)) % 2).astype(float)
    else:
        mix = np.clip(pw[..., 1] / 3.0, 0, 1)
    wall = a1 * mix[..., None] + a2 * (1 - mix[..., None])
    img[hit] = wall[hit] * 0.8
    dist[hit] = t_wall[hit]
    t_floor = -C[1] / np.where(np.abs(d_world[..., 1]) > 1e-9, d_world[..., 1], 1e-9)
    fl = (t_floor > 0) & (t_floor < dist)
    pf = C + d_world * np.where(fl, t_floor, 0)[..., None]
    chk = ((np.floor(pf[..., 0] / 0.5) + np.floor(pf[..., 2] / 0.5)) % 2)[..., None]
    floor = sc["floor"][0] * chk + sc["floor"][1] * (1 - chk)
    shade = np.ones((h, w))
    for _, yaw, pos in sc["people"]:  # soft contact shadow under each person
        r2 = (pf[..., 0] - pos[0]) ** 2 + (pf[..., 2] - pos[2]) ** 2
        shade *= 1 - 0.45 * np.exp(-r2 / 0.12)
        del yaw
    img[fl] = (floor * shade[..., None])[fl] * (0.6 + sc["floor"][2])
    dist[fl] = t_floor[fl]
    return img, dist


def render_scene(sc: dict, hw: tuple[int, int]) -> dict:
    """Render a sampled scene.

    Returns:
        dict with ``image`` (H x W x 3 uint8), ``label`` (H x W uint8, 29 classes), ``normal``
        (H x W x 3 float32, unit, camera frame, zero off-person), ``pointmap`` (H x W x 3 float32
        metres, camera frame, zero off-person), ``mask`` (H x W bool), ``albedo`` (H x W x 3 uint8),
        ``K`` (3 x 3), ``people``: list of {``keypoints`` (308 x 3: x, y, visibility 0/1/2),
        ``bbox`` xywh, ``area``}.
    """
    h, w = hw
    R = _look_at(sc["cam"], sc["target"])
    C = sc["cam"]
    prims, kps = [], []
    for pid, (person, yaw, pos) in enumerate(sc["people"]):
        frames = pose_person(person, yaw, pos)
        prims += [_to_camera(p, R, C) for p in build_primitives(person, frames, pid)]
        kp_world, slack = person_keypoints(person, frames)
        kps.append(((kp_world - C) @ R.T, slack))
    prims += [_to_camera(p, R, C) for p in sc["objects"]]
    K = sc["K"]
    out = render(prims, K, hw)
    depth, pid_map, axial = out["depth"], out["prim"], out["axial"]
    hitmask = pid_map >= 0
    n_p = len(prims)
    owner = np.array([p.tag["person"] for p in prims] + [-1])
    lab_a = np.array([p.tag["labels"][0] for p in prims] + [0], dtype=np.uint8)
    lab_b = np.array([p.tag["labels"][1] for p in prims] + [0], dtype=np.uint8)
    split = np.array([p.tag["split"] for p in prims] + [2.0])
    col_a = np.array([p.tag["colors"][0] for p in prims] + [np.zeros(3)])
    col_b = np.array([p.tag["colors"][1] for p in prims] + [np.zeros(3)])
    idx = np.where(hitmask, pid_map, n_p)
    second = axial >= split[idx]
    label = np.where(second, lab_b[idx], lab_a[idx])
    albedo = np.where(second[..., None], col_b[idx], col_a[idx])
    pts = out["rays"] * np.where(hitmask, depth, 0.0)[..., None]
    for i, p in enumerate(prims):  # paint iris and pupil on the eyeballs
        if p.tag.get("pattern") == "eye":
            sel = pid_map == i
            v = pts[sel] - p.tag["centre"]
            cosang = (v @ p.tag["gaze"]) / p.tag["eye_r"]
            iris = cosang > math.cos(math.asin(0.46))
            pupil = cosang > math.cos(math.asin(0.2))
            col = albedo[sel]
            col[iris] = p.tag["iris"]
            col[pupil] = 0.03
            albedo[sel] = col
    human = hitmask & (owner[idx] >= 0)
    albedo_q = np.round(np.clip(albedo, 0, 1) * 255).astype(np.uint8)
    alb = albedo_q.astype(np.float64) / 255.0
    normal = out["normal"]
    shading = sc["ambient"] * (0.8 - 0.2 * normal[..., 1])[..., None] * np.ones(3)
    for ldir, lcol in sc["lights"]:
        shading = shading + np.clip(normal @ ldir, 0, None)[..., None] * lcol
    bg, bg_dist = _background(out["rays"], R, C, sc)
    img = np.where(hitmask[..., None], alb * shading, bg)
    nrng = np.random.default_rng(sc["noise_seed"])
    img = img + nrng.normal(0, sc["noise"], img.shape)
    image = np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)
    del bg_dist
    people = []
    z_surface = np.where(hitmask, pts[..., 2], np.inf)
    for pid, (kp_cam, slack) in enumerate(kps):
        z = kp_cam[:, 2]
        u = K[0, 0] * kp_cam[:, 0] / z + K[0, 2]
        v = K[1, 1] * kp_cam[:, 1] / z + K[1, 2]
        inside = (z > 0) & (u >= -0.5) & (u < w - 0.5) & (v >= -0.5) & (v < h - 0.5)
        ui = np.clip(np.round(u).astype(int), 0, w - 1)
        vi = np.clip(np.round(v).astype(int), 0, h - 1)
        visible = inside & (z_surface[vi, ui] >= z - slack - VIS_MARGIN)
        vis = np.where(visible, 2, np.where(inside, 1, 0))
        kp = np.stack([np.where(inside, u, 0.0), np.where(inside, v, 0.0), vis], axis=1)
        inst = human & (owner[idx] == pid)
        area = int(inst.sum())
        if area == 0:
            continue
        ys, xs = np.nonzero(inst)
        bbox = [
            float(xs.min()),
            float(ys.min()),
            float(xs.max() - xs.min() + 1),
            float(ys.max() - ys.min() + 1),
        ]
        people.append({"keypoints": kp, "bbox": bbox, "area": area})
    label = np.where(human, label, 0).astype(np.uint8)
    return {
        "image": image,
        "label": label,
        "normal": np.where(human[..., None], normal, 0).astype(np.float32),
        "pointmap": np.where(human[..., None], pts, 0).astype(np.float32),
        "mask": human,
        "albedo": np.where(human[..., None], albedo_q, 0).astype(np.uint8),
        "K": K,
        "people": people,
    }


def synth_sample(seed: int, index: int, hw: tuple[int, int] = (256, 192)) -> dict:
    """Render sample ``index`` of the split with ``seed`` (independent of the split size)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(index)]))
    return render_scene(sample_scene(rng, hw), hw)
