"""The realism measurement's parts (benchmarks/analysis/realism_mediapipe.py, capsule_people.py) and
the realistic generator's occluder placement rule (occluders.cover_fraction / sample_occluders).

CI-sized: capsule meshes and a stand-in person (tests/_support/_realistic_standin.py, no anny), two-image
procedural splits; the MediaPipe end-to-end check is marked ``mediapipe``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from _realistic_standin import standin_person

from benchmarks.analysis import capsule_people as C
from benchmarks.analysis import realism_breakdown as B
from benchmarks.analysis import realism_mediapipe as R
from sapiens2.reference import keypoints308, seg_classes29

IDS = {k["name"]: k["id"] for k in keypoints308()["keypoints"]}


def _signed_volume(v, f):
    tri = v[f]
    return float(np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6)


def test_capsule_mesh_is_closed_outward_and_has_the_capsule_volume():
    a, b, r = np.array([0.1, 0.2, 0.3]), np.array([0.4, 1.0, -0.2]), 0.07
    v, f = C.capsule_mesh(a, b, r, rings=12, segments=48)
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert (counts == 2).all(), "every edge is shared by exactly two faces (closed surface)"
    length = float(np.linalg.norm(b - a))
    exact = math.pi * r**2 * length + 4 / 3 * math.pi * r**3
    assert _signed_volume(v, f) == pytest.approx(exact, rel=0.03)  # positive: wound outward
    d = np.abs(np.cross(v - a, (b - a) / length)).sum(1)  # distance to the axis line (L1 bound)
    assert d.max() <= 3 * r
    sphere_v, sphere_f = C.capsule_mesh(a, a, r, rings=12, segments=48)
    assert _signed_volume(sphere_v, sphere_f) == pytest.approx(4 / 3 * math.pi * r**3, rel=0.03)


def _person_with_ears():
    p = standin_person()
    kp, ok = p.keypoints.copy(), p.keypoint_defined.copy()
    for name, pos in (("left_ear", (0.08, 1.6, 0.0)), ("right_ear", (-0.08, 1.6, 0.0)),
                      ("left_wrist", (0.26, 0.75, 0.0)), ("right_wrist", (-0.26, 0.75, 0.0))):
        kp[IDS[name]], ok[IDS[name]] = pos, True
    return dataclasses.replace(p, keypoints=kp, keypoint_defined=ok)


def test_capsule_person_takes_classes_and_colours_from_the_nearest_body_parts():
    person = _person_with_ears()
    mesh = C.capsule_person(person, 3)
    assert mesh.person == 3 and mesh.name.endswith("_capsules")
    assert mesh.face_class.shape == (len(mesh.faces),) and mesh.vertex_albedo.shape == mesh.vertices.shape
    assert set(mesh.face_class.tolist()) <= set(person.face_class.tolist())
    # the head sphere sits at the ears' midpoint: its faces take the head's class
    head = np.asarray([0.0, 1.6, 0.0])
    near_head = np.linalg.norm(mesh.vertices[mesh.faces].mean(1) - head, axis=1) < 0.06
    head_class = person.face_class[np.argmin(np.linalg.norm(
        person.vertices[person.faces].mean(1) - head, axis=1))]
    assert near_head.any() and (mesh.face_class[near_head] == head_class).all()
    # a tongue inside the head is never the class or colour a capsule takes
    tongue = next(c["id"] for c in seg_classes29()["classes"] if c["name"] == "Tongue")
    tongue_v, tongue_f = C.capsule_mesh(head, head, 0.09)  # nearer to the head sphere than the skin in places
    mouthed = dataclasses.replace(
        person, vertices=np.concatenate([person.vertices, tongue_v]),
        faces=np.concatenate([person.faces, tongue_f + len(person.vertices)]),
        face_class=np.concatenate([person.face_class, np.full(len(tongue_f), tongue, np.uint8)]),
        vertex_albedo=np.concatenate([person.vertex_albedo, np.ones((len(tongue_v), 3), np.float32)]))
    with_tongue = C.capsule_person(mouthed, 0)
    assert tongue not in set(with_tongue.face_class.tolist())
    assert not (with_tongue.vertex_albedo == 1).all(axis=1).any()
    missing = dataclasses.replace(person, keypoint_defined=np.zeros(308, bool))
    with pytest.raises(ValueError, match="undefined; a capsule body needs them"):
        C.capsule_person(missing, 0)


def test_capsule_scenes_swap_only_the_bodies_and_restore_the_composer():
    from sapiens2.datasets.synth.realistic import scene as S

    original = S.compose_scene
    people = [_person_with_ears()]
    plain = S.compose_scene(np.random.default_rng(5), (128, 96), people)
    with C.capsule_scenes():
        swapped = S.compose_scene(np.random.default_rng(5), (128, 96), people)
    assert S.compose_scene is original
    assert swapped.meshes[0].name.endswith("_capsules") and not plain.meshes[0].name.endswith("_capsules")
    np.testing.assert_array_equal(swapped.camera.K, plain.camera.K)
    np.testing.assert_array_equal(swapped.camera.world_to_cam, plain.camera.world_to_cam)
    assert [m.name for m in swapped.meshes[1:]] == [m.name for m in plain.meshes[1:]]
    np.testing.assert_array_equal(swapped.people[0].world, plain.people[0].world)
    # the split writer composes through realistic_scene: the swap must reach it too
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings, realistic_scene

    def draw():
        return realistic_scene(np.random.default_rng(5), (128, 96), RealisticSettings(),
                               lambda rng, n: people)

    with C.capsule_scenes():
        assert draw().meshes[0].name.endswith("_capsules")
    assert not draw().meshes[0].name.endswith("_capsules")


def test_occluders_never_cover_most_of_the_framed_person():
    from sapiens2.datasets.synth.realistic.camera import sample_camera
    from sapiens2.datasets.synth.realistic.occluders import MAX_COVER, cover_fraction, sample_occluders

    person = standin_person()
    placed = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        cam = sample_camera(rng, (256, 192), 1.72, np.zeros(3), None, 0.5)
        objects = sample_occluders(rng, np.zeros(3), cam.centre(), 2, cam, person.vertices)
        placed += len(objects) > 0
        for name in {m.name.split("_")[0] for m in objects}:  # a chair's parts move together
            parts = [m for m in objects if m.name.split("_")[0] == name]
            assert cover_fraction(cam, person.vertices, parts) <= MAX_COVER, (seed, name)
    assert placed >= 10, "occluders still occur"


def test_cover_fraction_of_a_wall_in_front_is_one_and_of_nothing_nearby_zero():
    from sapiens2.datasets.synth.realistic.camera import sample_camera
    from sapiens2.datasets.synth.realistic.occluders import box, cover_fraction

    person = standin_person()
    cam = sample_camera(np.random.default_rng(0), (256, 192), 1.72, np.zeros(3), "full_body", 0.5)
    eye = cam.centre()
    wall = box("wall", eye * 0.5 + [0, 0.9, 0], (4.0, 4.0, 0.05), 0.0, np.ones(3) * 0.5)
    far_aside = box("aside", np.array([6.0, 0.5, 0.0]), (0.3, 0.3, 0.3), 0.0, np.ones(3) * 0.5)
    behind = box("behind", eye * 1.5 + [0, 0.5, 0], (0.3, 0.3, 0.3), 0.0, np.ones(3) * 0.5)
    assert cover_fraction(cam, person.vertices, [wall]) == pytest.approx(1.0)
    assert cover_fraction(cam, person.vertices, [far_aside]) == 0.0
    assert cover_fraction(cam, person.vertices, [behind]) == 0.0
    straddling = box("straddling", eye + [0, 0, 0], (0.5, 0.5, 0.5), 0.0, np.ones(3) * 0.5)
    assert cover_fraction(cam, person.vertices, [straddling]) == 1.0


def test_conditions_parse_and_errors_name_the_flag():
    C = R.Condition
    assert R.parse_conditions("realistic:512x384:24, capsule", 64) == [C("default", (512, 384), 24),
                                                                      C("capsule", (256, 192), 64)]
    assert R.parse_conditions("photo_full_body@16,procedural", 8) == [C("photo_full_body", (256, 192), 8, 16),
                                                                     C("procedural", (256, 192), 8)]
    assert C("default", spp=16).key == "default@16" and C("default").key == "default"
    assert "simple, photo facing" in C("simple_facing").label() and "capsules" in C("capsule").label()
    with pytest.raises(ValueError, match="--conditions 'studio:256x192': unknown condition"):
        R.parse_conditions("studio:256x192", 8)
    for bad in ("realistic:big", "realistic:256x192:many", "realistic:256x192:8:9", "default@many"):
        with pytest.raises(ValueError, match=r"expected NAME\[@SPP\]\[:HxW\[:N\]\]"):
            R.parse_conditions(bad, 8)
    for bad in ("procedural@16", "default@0"):
        with pytest.raises(ValueError, match="samples per pixel"):
            R.parse_conditions(bad, 8)
    with pytest.raises(ValueError, match="at least one image"):
        R.parse_conditions("realistic:256x192:0", 8)
    with pytest.raises(ValueError, match="name at least one"):
        R.parse_conditions(" , ", 8)


@pytest.fixture(scope="module")
def tiny_split(tmp_path_factory):
    from sapiens2.datasets.synth.writer import generate_split

    return generate_split(tmp_path_factory.mktemp("realism") / "p", n=2, seed=3, progress=False)


class _Result:
    def __init__(self, xy):
        self.xy = xy

    def shared(self):
        from benchmarks.systems.mediapipe_system import LANDMARK_MAP

        return self.xy, np.ones(len(LANDMARK_MAP))


def _exact_results(split, hw, shift_of_side: float = 0.0):
    """Per person, a result whose landmarks are the GT points (moved by shift x box side along x)."""
    from benchmarks.systems.mediapipe_system import vocabulary_ids
    from sapiens2.datasets import open_split

    ds = open_split(split, "pose", input_size=(hw[1], hw[0]))
    out = []
    for i, ann in enumerate(ds.anns):
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vocabulary_ids()]
        inv = np.asarray(ds[i]["crop"]["inv_affine"], float)  # crop -> image
        fwd = np.linalg.inv(np.vstack([inv, [0, 0, 1]]))[:2]  # image -> crop
        side = max(ann["bbox"][2], ann["bbox"][3])
        out.append(_Result(gt[:, :2] @ fwd[:, :2].T + fwd[:, 2] + shift_of_side * side * fwd[:, 0]))
    return out


def test_pck_counts_exact_points_as_hits_and_missed_people_as_misses(tiny_split):
    hw = (256, 192)
    exact, shifted = _exact_results(tiny_split, hw), _exact_results(tiny_split, hw, 0.2)
    assert B.pck_of_crops(tiny_split, exact, hw)["pck"] == pytest.approx(1.0)
    assert B.pck_of_crops(tiny_split, shifted, hw)["pck"] == 0.0
    half = [r if i % 2 == 0 else None for i, r in enumerate(exact)]
    got = B.pck_of_crops(tiny_split, half, hw)
    assert got["pck_detected"] == pytest.approx(1.0) and got["pck"] < 1.0
    with pytest.raises(RuntimeError, match="MediaPipe results for"):
        B.pck_of_crops(tiny_split, exact[:-1], hw)


def test_groups_cover_every_person_once_and_subset_ap_scores_their_own_predictions(tiny_split):
    from sapiens2.datasets import open_split

    hw = (256, 192)
    groups = B.person_groups(tiny_split, hw)
    members = sorted(i for g in groups.values() for i in g)
    n = len(open_split(tiny_split, "pose", input_size=(hw[1], hw[0])).anns)
    assert members == list(range(n))
    exact = _exact_results(tiny_split, hw)
    assert B.subset_body_ap(tiny_split, hw, exact, members) == pytest.approx(1.0)
    assert B.subset_body_ap(tiny_split, hw, [None] * n, members) == 0.0
    got = B.breakdown(tiny_split, hw, exact)
    assert sum(g["people"] for g in got.values()) == n and all(g["missed"] == 0 for g in got.values())


def test_keypoint_errors_are_zero_for_exact_points_and_scale_with_the_shift(tiny_split):
    hw = (256, 192)
    exact = B.keypoint_errors(tiny_split, hw, _exact_results(tiny_split, hw))
    assert all(e["median_error"] == pytest.approx(0, abs=1e-3) and e["oks_at_median"] == pytest.approx(1.0)
               for e in exact.values() if e["points"])
    assert list(exact)[:2] == ["nose", "left_eye"] and len(exact) == 17
    none = B.keypoint_errors(tiny_split, hw, [None] * len(_exact_results(tiny_split, hw)))
    assert all(e["points"] == 0 and e["median_error"] is None for e in none.values())
    shifted = B.keypoint_errors(tiny_split, hw, _exact_results(tiny_split, hw, 0.2))
    assert all(e["median_error"] > 0.05 and e["oks_at_median"] < 1 for e in shifted.values() if e["points"])


def test_class_census_counts_images_per_class(tiny_split):
    counts = B.class_census(tiny_split)
    assert counts["Background"] == 2 and max(counts.values()) <= 2
    assert sum(v > 0 for v in counts.values()) > 5


@pytest.mark.mediapipe
def test_a_condition_is_measured_once_and_then_read_back(tiny_split):
    from benchmarks.systems.mediapipe_system import MediaPipeSystem

    with MediaPipeSystem() as system:
        row, resampled = R.evaluate_condition(tiny_split, (256, 192), system)
    assert row["n_images"] == 2 and row["n_people"] >= 2
    assert 0 <= row["body_AP"] <= 1 and 0 <= row["PCK@0.1"] <= row["PCK@0.1_detected"] <= 1
    lo, hi = row["body_AP_95"]
    assert 0 <= lo <= row["body_AP"] <= hi <= 1
    assert row["whole_image_detection_rate"] == 1 - row["images_nobody_found"] / 2

    class Refuses:
        def pose(self, image):
            raise AssertionError("the kept result should have been read back")

    assert len(resampled) == R.INTERVAL_RESAMPLES and all(0 <= v <= 1 for v in resampled)
    assert R.evaluate_condition(tiny_split, (256, 192), Refuses()) == (row, resampled)


def test_the_simple_condition_parses_and_the_definition_script_names_a_missing_split(tmp_path):
    from benchmarks.analysis import realism_keypoint_definitions as D

    assert R.parse_conditions("simple:256x192:8", 64) == [R.Condition("simple", (256, 192), 8)]
    with pytest.raises(FileNotFoundError, match="--split"):
        D.main(["--split", str(tmp_path / "nowhere")])


def test_a_detection_that_matches_another_person_of_its_image_is_counted(tmp_path):
    from benchmarks.systems.mediapipe_system import vocabulary_ids
    from sapiens2.datasets import open_split
    from sapiens2.datasets.synth.writer import generate_split

    hw = (256, 192)
    split = generate_split(tmp_path / "two", n=2, seed=0, progress=False)  # two people per image
    exact = _exact_results(split, hw)
    assert B.wrong_person_share(split, hw, exact) == {"detected": len(exact), "wrong_person": 0}
    ds = open_split(split, "pose", input_size=(hw[1], hw[0]))
    a, b = (i for i, ann in enumerate(ds.anns) if ann["image_id"] == ds.anns[0]["image_id"])
    gt_b = np.asarray(ds.anns[b]["keypoints"], float).reshape(-1, 3)[vocabulary_ids()]
    fwd_a = np.linalg.inv(np.vstack([np.asarray(ds[a]["crop"]["inv_affine"], float), [0, 0, 1]]))[:2]
    exact[a] = _Result(gt_b[:, :2] @ fwd_a[:, :2].T + fwd_a[:, 2])  # person a's crop read as b
    assert B.wrong_person_share(split, hw, exact) == {"detected": len(exact), "wrong_person": 1}
    exact[b] = None  # a missed person is not a detection
    assert B.wrong_person_share(split, hw, exact) == {"detected": len(exact) - 1, "wrong_person": 1}


def test_the_scene_mix_sheet_draws_every_condition_and_names_a_missing_split(tmp_path):
    from benchmarks.analysis import scene_mix_sheet as S
    from benchmarks.results import write_measurement
    from sapiens2.datasets.synth.writer import generate_split

    row = {"condition": "procedural", "size": "64x48", "n_images": 2, "body_AP": 0.5,
           "body_AP_95": [0.4, 0.6]}
    write_measurement(tmp_path / "m.json", "test", {"conditions": [row]})
    with pytest.raises(FileNotFoundError, match="procedural_64x48_n2_s0: expected at least 2 images"):
        S.sheet(tmp_path, tmp_path / "m.json", tmp_path / "sheet.png", images=2)
    generate_split(tmp_path / "procedural_64x48_n2_s0", n=2, seed=0, size=(64, 48), progress=False)
    out = S.sheet(tmp_path, tmp_path / "m.json", tmp_path / "sheet.png", images=2)
    from PIL import Image

    assert Image.open(out).size[0] > 100


def test_condition_settings_render_the_capsules_in_the_default_scenes():
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings

    base = RealisticSettings(mode="path", spp=64)
    assert R.condition_settings(R.Condition("procedural"), base) is None
    assert R.condition_settings(R.Condition("capsule"), base).scenes == "default"
    got = R.condition_settings(R.Condition("photo", spp=16), base)
    assert (got.scenes, got.spp, got.mode) == ("photo", 16, "path")
