"""Pinhole cameras (OpenCV convention) framing people from full body to a head close-up.

Conventions, shared with the procedural generator and the pointmap readers: the camera frame has x
right, y down, z forward; pixel (u, v) is the centre of column u / row v, so the image spans
u in [-0.5, W - 0.5); a camera-frame point X projects to ``K @ X / X[2]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# What a framing puts in view: a fraction of the person's height measured from the top of the
# head (1 = the whole body), and how much of the image height it fills.
FRAMINGS = {
    "full_body": (1.0, (0.55, 0.9)),
    "knees_up": (0.72, (0.7, 0.95)),
    "upper_body": (0.45, (0.75, 1.0)),
    "head_shoulders": (0.22, (0.75, 1.0)),
}
FRAMING_WEIGHTS = {"full_body": 0.45, "knees_up": 0.2, "upper_body": 0.2, "head_shoulders": 0.15}


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: intrinsics, world-to-camera rigid transform and the image size."""

    K: np.ndarray  # (3, 3) float64, pixel-centre convention
    world_to_cam: np.ndarray  # (4, 4) float64, OpenCV camera frame
    hw: tuple[int, int]
    framing: str = "full_body"

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """World points (N, 3) in the camera frame."""
        return points @ self.world_to_cam[:3, :3].T + self.world_to_cam[:3, 3]

    def project(self, cam_points: np.ndarray) -> np.ndarray:
        """Camera-frame points (N, 3) to pixel coordinates (N, 2) (NaN behind the camera)."""
        z = cam_points[:, 2]
        safe = np.where(z > 1e-9, z, np.nan)
        u = self.K[0, 0] * cam_points[:, 0] / safe + self.K[0, 1] * cam_points[:, 1] / safe + self.K[0, 2]
        v = self.K[1, 1] * cam_points[:, 1] / safe + self.K[1, 2]
        return np.stack([u, v], axis=1)

    def centre(self) -> np.ndarray:
        """The camera centre in the world frame."""
        R, t = self.world_to_cam[:3, :3], self.world_to_cam[:3, 3]
        return -R.T @ t

    def mirrored(self) -> Camera:
        """The camera of the scene mirrored in the world plane x = 0, seen mirrored left-right.

        With the world mirrored by M = diag(-1, 1, 1), this camera images the mirrored scene exactly
        as the flipped image of the original: its frame is M' R M with M' = diag(-1, 1, 1) in the
        camera frame, and its principal point is mirrored to W - 1 - cx.
        """
        M = np.diag([-1.0, 1.0, 1.0])
        R, t = self.world_to_cam[:3, :3], self.world_to_cam[:3, 3]
        w2c = np.eye(4)
        w2c[:3, :3] = M @ R @ M
        w2c[:3, 3] = M @ t
        K = self.K.copy()
        K[0, 2] = self.hw[1] - 1 - K[0, 2]
        return Camera(K, w2c, self.hw, self.framing)


def look_at(eye: np.ndarray, target: np.ndarray, roll: float = 0.0) -> np.ndarray:
    """World-to-camera 4x4 of an OpenCV camera at ``eye`` looking at ``target`` (world y up)."""
    f = np.asarray(target, float) - np.asarray(eye, float)
    f /= np.linalg.norm(f)
    right = np.cross(f, [0.0, 1.0, 0.0])
    if np.linalg.norm(right) < 1e-6:  # looking straight down or up: any right vector will do
        right = np.array([1.0, 0.0, 0.0])
    right /= np.linalg.norm(right)
    down = np.cross(f, right)
    c, s = math.cos(roll), math.sin(roll)
    R = np.stack([c * right + s * down, -s * right + c * down, f])
    w2c = np.eye(4)
    w2c[:3, :3] = R
    w2c[:3, 3] = -R @ np.asarray(eye, float)
    return w2c


def intrinsics(hw: tuple[int, int], fov_y_deg: float,
               offset_px: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """K for a vertical field of view ``fov_y_deg``, square pixels, principal point near the centre."""
    h, w = hw
    f = 0.5 * h / math.tan(math.radians(fov_y_deg) / 2)
    return np.array([[f, 0.0, (w - 1) / 2 + offset_px[0]], [0.0, f, (h - 1) / 2 + offset_px[1]],
                     [0.0, 0.0, 1.0]])


def sample_camera(rng: np.random.Generator, hw: tuple[int, int], subject_top: float,
                  subject_centre: np.ndarray, framing: str | None = None,
                  subject_width: float = 0.5) -> Camera:
    """A camera framing the subject (a person at ``subject_centre``, its top at ``subject_top``).

    Args:
        rng: the scene's generator.
        hw: image (H, W).
        subject_top: world height (y) of the subject's highest point, metres.
        subject_centre: world (x, y, z) of the middle of the subject's footprint on the floor.
        framing: one of :data:`FRAMINGS`, or None to sample one.
        subject_width: the subject's largest horizontal extent, metres. A subject wider than tall
            (lying, sprawled) is always framed whole, its width fitting the image width.

    Returns:
        The camera; the framed part of the body fills the sampled fraction of the image height.
    """
    if framing is None:
        names = list(FRAMING_WEIGHTS)
        framing = str(rng.choice(names, p=np.array([FRAMING_WEIGHTS[k] for k in names])))
    if subject_width > subject_top:  # the top-down fractions of a lying body would frame its side
        framing = "full_body"
    part, fill_range = FRAMINGS[framing]
    fov = rng.uniform(30.0, 55.0) if framing in ("full_body", "knees_up") else rng.uniform(20.0, 45.0)
    K = intrinsics(hw, fov, (rng.normal(0, 0.01 * hw[1]), rng.normal(0, 0.01 * hw[0])))
    span = max(subject_top * part, 0.25)  # metres of body in view
    fill = rng.uniform(*fill_range)
    # metres of the image height that the span needs, the width fitting the image width too
    needed = max(span, subject_width * hw[0] / hw[1]) if framing == "full_body" else span
    dist = K[1, 1] * needed / (fill * hw[0]) + 0.2 + (subject_width / 2 if framing == "full_body" else 0.0)
    centre_y = subject_top - span / 2 + rng.normal(0, 0.03 * span)
    azim = math.radians(rng.uniform(-35, 35))
    lying = subject_width > subject_top
    elev = math.radians(rng.uniform(15, 45) if lying else rng.uniform(-12, 20))  # see a lying body from above
    base = np.asarray(subject_centre, float)
    target = base + np.array([rng.normal(0, 0.05 * span), centre_y, 0.0])
    eye = target + dist * np.array(
        [math.sin(azim) * math.cos(elev), math.sin(elev), math.cos(azim) * math.cos(elev)])
    eye[1] = max(eye[1], 0.15)  # never below the floor
    return Camera(K, look_at(eye, target, roll=math.radians(rng.normal(0, 2.0))), tuple(hw), framing)


def mitsuba_sensor(cam: Camera, mi, sampler: dict, film_extra: dict | None = None) -> dict:
    """The Mitsuba ``perspective`` sensor dict of ``cam``.

    Mitsuba's camera looks along +z with +x to the image left and +y up, so its to-world matrix is
    the OpenCV camera-to-world one with x and y negated. The principal point offset is in units of
    the film size, measured from the film centre, with the opposite sign of a shift of K's cx, cy
    (checked by the pointmap reprojection test).
    """
    h, w = cam.hw
    c2w = np.linalg.inv(cam.world_to_cam) @ np.diag([-1.0, -1.0, 1.0, 1.0])
    fov_y = math.degrees(2 * math.atan(0.5 * h / cam.K[1, 1]))
    film = {"type": "hdrfilm", "width": int(w), "height": int(h), "rfilter": {"type": "box"},
            "pixel_format": "rgb", "component_format": "float32"}
    film.update(film_extra or {})
    return {
        "type": "perspective",
        "fov": fov_y,
        "fov_axis": "y",
        "principal_point_offset_x": float(((w - 1) / 2 - cam.K[0, 2]) / w),
        "principal_point_offset_y": float(((h - 1) / 2 - cam.K[1, 2]) / h),
        "near_clip": 0.01,
        "far_clip": 1000.0,
        "to_world": mi.ScalarTransform4f(c2w.tolist()),
        "film": film,
        "sampler": sampler,
    }
