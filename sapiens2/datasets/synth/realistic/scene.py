"""One realistic scene: people (anny meshes), occluders, floor and wall, a camera and its lighting.

A :class:`RealisticScene` holds plain arrays; :func:`mitsuba_scene` turns it into a Mitsuba scene
(geometry only for the ground-truth pass, with the environment's emitters for the image). People
come first in :attr:`RealisticScene.meshes`, each with ``person`` = its index.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .camera import Camera, sample_camera
from .environment import Environment, mirrored, mitsuba_emitters, sample_environment
from .occluders import MAX_COVER, SceneMesh, back_wall, ground, sample_occluders
from .people import PeopleSettings, sample_people

MIRROR_X = np.diag([-1.0, 1.0, 1.0, 1.0])


@dataclass(frozen=True)
class PersonKeypoints:
    """A person's 308 keypoints in the world frame, and how each one's visibility is decided."""

    world: np.ndarray  # (308, 3) float64
    defined: np.ndarray  # (308,) bool: False -> v = 0 in every image
    surface: np.ndarray  # (308,) bool: on the skin (depth test) or inside (tested at the covering skin)
    name: str = "person"


@dataclass(frozen=True)
class RealisticScene:
    """Everything one image is rendered from."""

    meshes: list[SceneMesh]  # people first (``person`` = 0, 1, ...), then the rest (-1)
    people: list[PersonKeypoints]
    camera: Camera
    environment: Environment


def person_mesh(person, index: int) -> SceneMesh:
    """A :class:`SceneMesh` of a ``PersonMesh`` (see REALISTIC interface: vertices, faces, classes)."""
    v = np.asarray(person.vertices, float)
    f = np.asarray(person.faces, np.int64)
    cls = np.asarray(person.face_class, np.uint8)
    alb = np.asarray(person.vertex_albedo, np.float32)
    if v.ndim != 2 or v.shape[1] != 3 or f.ndim != 2 or f.shape[1] != 3 or cls.shape != (len(f),) \
            or alb.shape != v.shape:
        raise ValueError(f"person {person.name!r}: expected vertices (V, 3), faces (F, 3), face_class (F,), "
                         f"vertex_albedo (V, 3); got {v.shape}, {f.shape}, {cls.shape}, {alb.shape}")
    if f.size and (f.min() < 0 or f.max() >= len(v)):
        raise ValueError(f"person {person.name!r}: face indices outside 0..{len(v) - 1}")
    if not np.all((alb >= 0) & (alb <= 1)):
        raise ValueError(f"person {person.name!r}: vertex_albedo outside [0, 1]")
    return SceneMesh(str(person.name), v, f, alb, cls, index, True)


def person_keypoints(person) -> PersonKeypoints:
    """The keypoint part of a ``PersonMesh``."""
    kp = np.asarray(person.keypoints, float)
    if kp.shape != (308, 3):
        raise ValueError(f"person {person.name!r}: keypoints must be (308, 3), got {kp.shape}")
    return PersonKeypoints(kp, np.asarray(person.keypoint_defined, bool),
                           np.asarray(person.keypoint_surface, bool), str(person.name))


def compose_scene(rng: np.random.Generator, hw: tuple[int, int], people: list, framing: str | None = None,
                  environment: str | None = None, max_objects: int = 2,
                  max_cover: float = MAX_COVER) -> RealisticScene:
    """Put ``people`` (PersonMesh objects) into a scene with a sampled camera, occluders and lighting.

    Args:
        rng: the scene's generator (everything sampled here comes from it).
        hw: image (H, W).
        people: the people, standing on the floor y = 0; the first one is framed.
        framing: camera framing name (:data:`camera.FRAMINGS`) or None to sample one.
        environment: lighting kind (:data:`environment.KINDS`) or None to sample one.
        max_objects: at most this many occluding objects.
        max_cover: the largest share of the framed person's image box one object may cover.
    """
    if not people:
        raise ValueError("a realistic scene needs at least one person")
    meshes = [person_mesh(p, i) for i, p in enumerate(people)]
    main = meshes[0].vertices
    lo, hi = main.min(axis=0), main.max(axis=0)
    feet = np.array([(lo[0] + hi[0]) / 2, 0.0, (lo[2] + hi[2]) / 2])
    width = float(max(hi[0] - lo[0], hi[2] - lo[2]))
    cam = sample_camera(rng, hw, float(hi[1]), feet, framing, width)
    meshes.append(ground(rng))
    if rng.random() < 0.6:  # a back wall behind everyone
        far = min(float(m.vertices[:, 2].min()) for m in meshes[: len(people)])
        meshes.append(back_wall(rng, far - rng.uniform(0.8, 3.0)))
    meshes += sample_occluders(rng, feet, cam.centre(), max_objects, cam, main, max_cover)
    env = sample_environment(rng, feet, environment)
    return RealisticScene(meshes, [person_keypoints(p) for p in people], cam, env)


def mirror_scene(scene: RealisticScene) -> RealisticScene:
    """The scene mirrored in the world plane x = 0, with a camera that sees it as the flipped image."""
    meshes = [m.transformed(MIRROR_X) for m in scene.meshes]
    people = [replace(p, world=p.world * [-1.0, 1.0, 1.0]) for p in scene.people]
    return RealisticScene(meshes, people, scene.camera.mirrored(), mirrored(scene.environment))


def _mitsuba_mesh(m: SceneMesh, mi):
    mesh = mi.Mesh(m.name, len(m.vertices), len(m.faces), has_vertex_normals=m.smooth)
    params = mi.traverse(mesh)
    params["vertex_positions"] = np.ascontiguousarray(m.vertices, np.float32).ravel()
    params["faces"] = np.ascontiguousarray(m.faces, np.uint32).ravel()
    params.update()
    if m.smooth:
        mesh.recompute_vertex_normals()
    mesh.add_attribute("vertex_albedo", 3, np.ascontiguousarray(m.vertex_albedo, np.float32).ravel())
    # two-sided: open clothing shells and the back of thin objects are lit in the image too
    mesh.set_bsdf(mi.load_dict({"type": "twosided", "bsdf": {
        "type": "diffuse", "reflectance": {"type": "mesh_attribute", "name": "vertex_albedo"}}}))
    return mesh


def mitsuba_scene(scene: RealisticScene, mi, sensor: dict, integrator: dict, lights: bool):
    """Load the Mitsuba scene; shape keys are ``shape000``, ``shape001``... in :attr:`meshes` order.

    Args:
        scene: the scene.
        mi: the mitsuba module with its variant set.
        sensor: the sensor dict (:func:`camera.mitsuba_sensor`).
        integrator: the integrator dict.
        lights: add the environment's emitters (off for the ground-truth pass).
    """
    d = {"type": "scene", "sensor": sensor, "integrator": integrator}
    for i, m in enumerate(scene.meshes):
        d[f"shape{i:03d}"] = _mitsuba_mesh(m, mi)
    if lights:
        d.update(mitsuba_emitters(scene.environment, mi))
    return mi.load_dict(d)


def sample_realistic_scene(rng: np.random.Generator, hw: tuple[int, int], n_people: int, people_settings=None,
                           framing: str | None = None) -> RealisticScene:
    """Sample anny people (``people.sample_people``) and compose a scene around them."""
    settings = people_settings if people_settings is not None else PeopleSettings()
    people = sample_people(rng, n_people, settings)
    return compose_scene(rng, hw, people, framing=framing)


def with_environment(scene: RealisticScene, env: Environment) -> RealisticScene:
    """The same scene under other lighting."""
    return replace(scene, environment=env)


__all__ = ["PersonKeypoints", "RealisticScene", "compose_scene", "mirror_scene", "mitsuba_scene",
           "person_keypoints", "person_mesh", "sample_realistic_scene", "with_environment"]
