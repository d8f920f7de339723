"""People for the realistic generator: anny bodies, posed, dressed, coloured and placed on the floor.

:func:`sample_people` is the entry point the renderer uses: it returns one :class:`PersonMesh` per
person, in the world frame (metres, y up, the floor at y = 0), not intersecting each other.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from . import clothing, poses
from .bodies import ANNY_TO_WORLD, faces, pose_body, sample_shape
from .keypoints import body_keypoints
from .parts import body_face_classes


@dataclass(frozen=True)
class PersonMesh:
    """One person as a triangle mesh with exact labels (see REALISTIC_INTERFACE)."""

    vertices: np.ndarray  # (V, 3) float64, world frame, metres, y up, the floor at y = 0
    faces: np.ndarray  # (F, 3) int64 triangle vertex indices
    face_class: np.ndarray  # (F,) uint8 seg_classes29 id of each face
    vertex_albedo: np.ndarray  # (V, 3) float32 diffuse albedo in [0, 1]
    keypoints: np.ndarray  # (308, 3) float64 world positions (keypoints308 order; 0 where undefined)
    keypoint_defined: np.ndarray  # (308,) bool: False = the mesh cannot define the point (unlabelled)
    keypoint_surface: np.ndarray  # (308,) bool: True = on the surface, False = inside the body
    name: str
    pose_name: str = ""
    shape: dict = field(default_factory=dict)  # anny phenotype values


@dataclass(frozen=True)
class PeopleSettings:
    """How :func:`sample_people` draws people.

    Attributes:
        pose_names: the named poses to draw from (:data:`poses.POSES`).
        pose_weights: relative frequency of each of ``pose_names`` (None: all equally often).
        facing_share: the share of people turned towards the camera (their yaw drawn around 0 with
            ``facing_spread`` degrees of spread); the rest face any direction.
        facing_spread: standard deviation (degrees) of the yaw of people turned towards the camera.
        perturb_scale: multiplies the joint-limited perturbation's spread (0 = the named poses exactly).
        age_range: anny age range (-1/3 newborn .. 1 old).
        spread: people are placed within this radius (metres) of the origin on the floor.
        gap: the least floor gap (metres) between two people's bounding boxes.
        depth_ratio: the placement disc's extent along the world z axis (towards the cameras, which
            look along -z from within about 35 degrees of it) relative to x: below 1 places people
            more beside than behind one another, as people posing for a photo stand.
        max_penetration: the deepest an arm may sink into the torso (metres) before the pose is redrawn.
        clothing: whether people wear clothes, hair and accessories (False: bare anny bodies).
        max_tries: draws per person before giving up with an error.
    """

    pose_names: tuple[str, ...] = tuple(poses.POSES)
    pose_weights: tuple[float, ...] | None = None
    facing_share: float = 0.0
    facing_spread: float = 40.0
    perturb_scale: float = 1.0
    age_range: tuple[float, float] = (1 / 6, 1.0)
    spread: float = 1.5
    gap: float = 0.1
    depth_ratio: float = 1.0
    max_penetration: float = 0.02
    clothing: bool = True
    max_tries: int = 40


    def pose_probabilities(self) -> np.ndarray | None:
        """The draw probability of each of ``pose_names`` (None: uniform)."""
        if self.pose_weights is None:
            return None
        w = np.asarray(self.pose_weights, float)
        if w.shape != (len(self.pose_names),) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"pose_weights {self.pose_weights}: expected {len(self.pose_names)} "
                             f"non-negative weights for the poses {self.pose_names}")
        return w / w.sum()

    def draw_yaw(self, rng: np.random.Generator) -> float:
        """A person's yaw in degrees (0 faces the camera's side of the scene)."""
        if self.facing_share > 0 and rng.random() < self.facing_share:
            return float(rng.normal(0.0, self.facing_spread))
        return float(rng.uniform(0.0, 360.0))


def skin_albedo(rng: np.random.Generator, ethnicity: np.ndarray) -> np.ndarray:
    """A linear-RGB skin albedo over a realistic range (very light to very dark).

    The darkness t in [0, 1] leans on the ethnicity mix (African ancestry darker on average) but every
    mix reaches a wide range, as real skin does. The two ends are measured-like diffuse albedos.
    """
    mean = 0.25 + 0.55 * ethnicity[0] + 0.15 * ethnicity[1]
    t = float(np.clip(rng.normal(mean, 0.18), 0.0, 1.0))
    light = np.array([0.78, 0.56, 0.45])
    dark = np.array([0.12, 0.065, 0.04])
    return (light * (1 - t) + dark * t) * rng.uniform(0.93, 1.07, size=3)


def _world_turn(rotvec: np.ndarray) -> np.ndarray:
    """An anny-axes rotation vector as a world-frame rotation matrix."""
    return ANNY_TO_WORLD @ Rotation.from_rotvec(rotvec).as_matrix() @ ANNY_TO_WORLD.T


def build_person(rng: np.random.Generator, settings: PeopleSettings, name: str) -> PersonMesh:
    """One person at the origin (feet on the floor, facing a random yaw), not yet placed."""
    shape = sample_shape(rng, settings.age_range)
    for _ in range(settings.max_tries):
        pose_name = str(rng.choice(settings.pose_names, p=settings.pose_probabilities()))
        pose = poses.perturb(poses.named_pose(pose_name), rng, settings.perturb_scale)
        body = pose_body(shape, pose.matrices())
        if poses.torso_penetration(body.vertices) <= settings.max_penetration:
            break
    else:
        raise RuntimeError(f"{name}: no pose without arms through the torso in {settings.max_tries} draws "
                           f"(poses {settings.pose_names}, max_penetration {settings.max_penetration} m)")
    turn = Rotation.from_euler("y", settings.draw_yaw(rng), degrees=True).as_matrix() @ _world_turn(
        pose.global_rotvec)
    keypoints, defined, surface = body_keypoints(body)
    skin = skin_albedo(rng, np.asarray(shape.values[-3:]))
    dressed = clothing.dress(rng, body, skin, body_face_classes(), faces(), enabled=settings.clothing)
    vertices = dressed.vertices @ turn.T
    keypoints = keypoints @ turn.T
    lift = np.array([0.0, -vertices[:, 1].min(), 0.0])
    centre = np.array([vertices[:, 0].mean(), 0.0, vertices[:, 2].mean()])
    offset = lift - centre
    keypoints = np.where(defined[:, None], keypoints + offset, 0.0)
    return PersonMesh(
        vertices=vertices + offset, faces=dressed.faces, face_class=dressed.face_class,
        vertex_albedo=dressed.albedo.astype(np.float32), keypoints=keypoints, keypoint_defined=defined,
        keypoint_surface=surface, name=name, pose_name=pose_name, shape=shape.as_dict())


def _footprint(person: PersonMesh) -> tuple[np.ndarray, np.ndarray]:
    xz = person.vertices[:, [0, 2]]
    return xz.min(axis=0), xz.max(axis=0)


def _moved(person: PersonMesh, shift: np.ndarray) -> PersonMesh:
    move = np.array([shift[0], 0.0, shift[1]])
    kp = np.where(person.keypoint_defined[:, None], person.keypoints + move, 0.0)
    return dataclasses.replace(person, vertices=person.vertices + move, keypoints=kp)


def sample_people(rng: np.random.Generator, n_people: int,
                  settings: PeopleSettings | None = None) -> list[PersonMesh]:
    """``n_people`` people standing (or sitting, lying...) on the floor, no two intersecting.

    Each person's floor footprint (its axis-aligned box in x-z, widened by ``settings.gap``) must not
    overlap another's; positions are drawn in a disc of radius ``settings.spread`` (grown when crowded).

    Raises:
        ValueError: ``n_people`` < 1.
        RuntimeError: no pose or no free floor spot was found within ``settings.max_tries`` draws.
    """
    settings = settings or PeopleSettings()
    if n_people < 1:
        raise ValueError(f"n_people must be at least 1, got {n_people}")
    placed: list[PersonMesh] = []
    boxes: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(n_people):
        person = build_person(rng, settings, f"person{i}")
        lo, hi = _footprint(person)
        for attempt in range(settings.max_tries):
            radius = settings.spread * (1.0 + 0.1 * attempt) if i else 0.0
            r, a = radius * np.sqrt(rng.uniform()), rng.uniform(0.0, 2 * np.pi)
            shift = np.array([r * np.cos(a), r * np.sin(a) * settings.depth_ratio])
            if all(np.any(lo + shift - settings.gap > bhi) or np.any(hi + shift + settings.gap < blo)
                   for blo, bhi in boxes):
                break
        else:
            raise RuntimeError(f"person{i}: no free floor spot within {settings.max_tries} draws "
                               f"(spread {settings.spread} m, {len(placed)} people placed)")
        placed.append(_moved(person, shift))
        boxes.append((lo + shift, hi + shift))
    return placed
