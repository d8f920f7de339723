"""The realistic generator's renderer: every ground truth of one scene agrees with the others.

Tiny renders (128 x 96, fast mode) of a stand-in person (tests/_support/_realistic_standin.py: ellipsoid
parts with known classes, albedos and keypoints), so the checks do not depend on the body model:
pointmap reprojection through K, normals against the pointmap's finite differences, keypoints on
their own part's label and occluded ones behind another surface, albedo exact and independent of
lighting, left/right under a mirrored scene. The last tests render a small split with anny people
and read it with the split readers and the evaluators.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from _realistic_standin import (
    L_HIP,
    L_KNEE,
    LEFT_UPPER_ARM,
    NOSE,
    PARTS,
    R_HIP,
    R_KNEE,
    RIGHT_UPPER_ARM,
    keypoint_classes,
    standin_person,
)

HW = (128, 96)
pytestmark = pytest.mark.mitsuba


@pytest.fixture(scope="module")
def mi():
    from sapiens2.datasets.synth.realistic.variant import load_mitsuba

    return load_mitsuba(threads=2)


def _scene(seed: int, people=None, framing: str = "full_body", environment: str | None = None, objects=0):
    from sapiens2.datasets.synth.realistic.scene import compose_scene

    rng = np.random.default_rng(seed)
    people = people if people is not None else [standin_person()]
    return compose_scene(rng, HW, people, framing=framing, environment=environment, max_objects=objects)


def _render(scene, mi, mode="fast", spp=4, seed=0):
    from sapiens2.datasets.synth.realistic.render import render_all

    return render_all(scene, mi, mode, spp, seed)


def test_pointmap_reprojects_to_its_pixel_through_K(mi):
    scene = _scene(1, objects=2)
    K = scene.camera.K.copy()
    K[0, 2] += 3.3  # an off-centre principal point must be honoured exactly too
    K[1, 2] -= 2.1
    scene = replace(scene, camera=replace(scene.camera, K=K))
    r = _render(scene, mi)
    m = r["mask"]
    assert m.sum() > 300
    np.testing.assert_array_equal(m, r["label"] > 0)
    p = r["pointmap"].astype(np.float64)
    assert (p[m][:, 2] > 0).all() and (p[~m] == 0).all() and (r["normal"][~m] == 0).all()
    v, u = np.nonzero(m)
    pts = p[m]
    np.testing.assert_allclose(K[0, 0] * pts[:, 0] / pts[:, 2] + K[0, 2], u, atol=1e-3)
    np.testing.assert_allclose(K[1, 1] * pts[:, 1] / pts[:, 2] + K[1, 2], v, atol=1e-3)
    np.testing.assert_array_equal(r["K"], K)


def test_normals_agree_with_the_pointmaps_finite_differences(mi):
    r = _render(_scene(2, framing="upper_body"), mi)
    n, p, lab = r["normal"].astype(np.float64), r["pointmap"].astype(np.float64), r["label"]
    np.testing.assert_allclose(np.linalg.norm(n[r["mask"]], axis=1), 1.0, atol=1e-5)
    assert ((n[r["mask"]] * p[r["mask"]]).sum(axis=1) < 0).all(), "normals face the camera"
    du = p[1:-1, 2:] - p[1:-1, :-2]
    dv = p[2:, 1:-1] - p[:-2, 1:-1]
    fd = np.cross(du, dv)
    fd /= np.maximum(np.linalg.norm(fd, axis=-1, keepdims=True), 1e-12)
    centre = lab[1:-1, 1:-1]
    smooth = centre > 0  # the 3 x 3 neighbourhood on one part: no silhouette or part boundary inside
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            smooth &= lab[1 + dy:lab.shape[0] - 1 + dy, 1 + dx:lab.shape[1] - 1 + dx] == centre
    assert smooth.sum() > 300
    cosang = np.abs(np.sum(fd[smooth] * n[1:-1, 1:-1][smooth], axis=-1))
    angle = np.degrees(np.arccos(np.clip(cosang, -1, 1)))
    assert np.median(angle) < 3.0 and np.percentile(angle, 95) < 10.0, (np.median(angle), angle.max())


def test_visible_keypoints_lie_on_their_own_parts_label(mi):
    classes = keypoint_classes()
    checked = 0
    for seed in (3, 4, 5):
        r = _render(_scene(seed, people=[standin_person(yaw=0.3 * (seed - 4))]), mi)
        kp = r["people"][0]["keypoints"]
        lab = r["label"]
        for k, cls in classes.items():
            if kp[k, 2] != 2:
                continue
            u, v = int(round(kp[k, 0])), int(round(kp[k, 1]))
            window = lab[max(v - 1, 0):v + 2, max(u - 1, 0):u + 2]  # one pixel of tolerance
            assert cls in window, f"keypoint {k} at ({u}, {v}) sees labels {np.unique(window)}, not {cls}"
            checked += 1
        assert (kp[[k for k in range(308) if k not in classes], 2] == 0).all(), "undefined points: v = 0"
    assert checked >= 20


def test_occluded_keypoints_lie_behind_another_surface(mi):
    from sapiens2.datasets.synth.realistic.occluders import box

    scene = _scene(6)
    eye = scene.camera.centre()
    hips = np.array([0.0, 0.7, 0.0])
    wall = box("blocker", hips + 0.45 * (eye - hips) * np.array([1, 0, 1]), np.array([0.8, 0.5, 0.05]),
               float(np.arctan2(eye[0], eye[2])), np.array([0.5, 0.5, 0.5]))
    scene = replace(scene, meshes=[*scene.meshes, wall])
    r = _render(scene, mi)
    kp = r["people"][0]["keypoints"]
    blocked = [k for k in (L_HIP, R_HIP, L_KNEE, R_KNEE) if kp[k, 2] == 1]
    assert len(blocked) >= 2, kp[[L_HIP, R_HIP, L_KNEE, R_KNEE]]
    z_kp = scene.camera.to_camera(scene.people[0].world)[:, 2]
    for k in blocked:
        u, v = int(round(kp[k, 0])), int(round(kp[k, 1]))
        assert r["zbuffer"][v, u] < z_kp[k] - 0.1, "an occluded point has a surface well in front of it"
        assert scene.meshes[r["mesh_index"][v, u]].name == "blocker"
    assert kp[NOSE, 2] == 2
    # seen from behind, the nose is hidden by the person's own head
    back = _render(_scene(6, people=[standin_person(yaw=np.pi)]), mi)["people"][0]["keypoints"]
    assert back[NOSE, 2] == 1


def test_albedo_is_exact_and_independent_of_lighting(mi):
    from sapiens2.datasets.synth.realistic.environment import sample_environment
    from sapiens2.datasets.synth.realistic.scene import with_environment

    person = standin_person(seed=9)
    scene = _scene(7, people=[person], environment="sky")
    studio = with_environment(scene, sample_environment(np.random.default_rng(1), np.zeros(3), "indoor"))
    a, b = _render(scene, mi), _render(studio, mi)
    np.testing.assert_array_equal(a["albedo"], b["albedo"])
    assert np.abs(a["image"].astype(int) - b["image"].astype(int)).mean() > 5, "the lighting changed"
    for cls in PARTS:  # each stand-in part has one colour: the albedo map holds exactly it
        sel = a["label"] == cls
        if sel.sum() == 0:
            continue
        colour = person.vertex_albedo[_part_vertex(person, cls)][0]
        np.testing.assert_array_equal(a["albedo"][sel], np.tile(np.round(colour * 255), (sel.sum(), 1)))


def _part_vertex(person, cls) -> np.ndarray:
    """A boolean mask of the vertices of part ``cls``."""
    used = np.zeros(len(person.vertices), bool)
    used[person.faces[person.face_class == cls].ravel()] = True
    return used


def test_mirrored_scene_gives_the_flipped_ground_truth(mi):
    from sapiens2.datasets.synth.realistic.scene import mirror_scene

    scene = _scene(8, people=[standin_person(yaw=0.4), standin_person((0.8, 0, -1.0), -0.3, 2, "p1")],
                   objects=2)
    a, b = _render(scene, mi), _render(mirror_scene(scene), mi)
    w = HW[1]
    np.testing.assert_array_equal(b["label"], a["label"][:, ::-1])
    np.testing.assert_array_equal(b["mask"], a["mask"][:, ::-1])
    flip = np.array([-1.0, 1.0, 1.0], np.float32)
    np.testing.assert_allclose(b["normal"], a["normal"][:, ::-1] * flip, atol=2e-4)
    np.testing.assert_allclose(b["pointmap"], a["pointmap"][:, ::-1] * flip, atol=2e-4)
    for pa, pb in zip(a["people"], b["people"], strict=True):
        ka, kb = pa["keypoints"], pb["keypoints"]
        np.testing.assert_array_equal(ka[:, 2], kb[:, 2])
        on = ka[:, 2] > 0
        np.testing.assert_allclose(kb[on, 0], w - 1 - ka[on, 0], atol=1e-6)
        np.testing.assert_allclose(kb[on, 1], ka[on, 1], atol=1e-6)


def test_a_person_facing_the_camera_shows_their_left_on_the_image_right(mi):
    r = _render(_scene(10, framing="upper_body"), mi)
    cols = np.arange(HW[1])[None, :].repeat(HW[0], 0)
    left, right = r["label"] == LEFT_UPPER_ARM, r["label"] == RIGHT_UPPER_ARM
    assert left.sum() > 20 and right.sum() > 20
    assert cols[left].mean() > cols[right].mean() + 10


def test_image_is_deterministic_for_a_seed(mi):
    scene = _scene(11, objects=1)
    from sapiens2.datasets.synth.realistic.render import render_image

    a, b = render_image(scene, mi, "path", 4, seed=3), render_image(scene, mi, "path", 4, seed=3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, render_image(scene, mi, "path", 4, seed=4))
    assert a.shape == (*HW, 3) and a.dtype == np.uint8 and a.std() > 5


def test_impossible_settings_and_unknown_names_are_errors_naming_the_flag():
    from sapiens2.datasets.synth import generate_split
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings

    with pytest.raises(ValueError, match="--spp 0"):
        RealisticSettings(mode="path", spp=0).check()
    with pytest.raises(ValueError, match="--people 7"):
        RealisticSettings(max_people=7).check()
    with pytest.raises(ValueError, match="--render 'slow'"):
        RealisticSettings(mode="slow").check()
    with pytest.raises(KeyError, match="--generator"):
        generate_split("/nonexistent/never", n=1, generator="photoreal")
    with pytest.raises(ValueError, match="--size 8x96"):
        generate_split("/nonexistent/never", n=1, size=(8, 96), generator="realistic")
    assert RealisticSettings(scenes="photo").record()["scenes"] == "photo"
    with pytest.raises(ValueError, match="scenes 'easy'"):
        RealisticSettings(scenes="easy").check()


def test_simple_scenes_frame_the_whole_person_without_occluders():
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings, realistic_scene, sample_rng

    simple, default = RealisticSettings(scenes="simple"), RealisticSettings()
    assert "scenes" not in default.record() and simple.record()["scenes"] == "simple"
    framings = set()
    for index in range(6):
        scene = realistic_scene(sample_rng(0, index), HW, simple, lambda rng, n: [standin_person()])
        assert scene.camera.framing == "full_body"
        assert {m.name for m in scene.meshes if m.person < 0} <= {"ground", "wall"}
        framings.add(realistic_scene(sample_rng(0, index), HW, default,
                                     lambda rng, n: [standin_person()]).camera.framing)
    assert framings != {"full_body"}, "the default scenes draw other framings too"


def test_missing_renderer_and_llvm_fall_back(monkeypatch, capsys):
    import importlib.util

    from sapiens2.datasets.synth.realistic import variant

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mitsuba" else real(name))
    with pytest.raises(variant.RendererMissingError, match="'mitsuba' package.*realistic"):
        variant.choose_variant()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    for key in (variant.VARIANT_ENV, variant.VARIANT_ENV + "_CHECKED", variant.LLVM_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(variant, "llvm_candidates", lambda: ["/nowhere/libLLVM-15.so"])
    assert variant.choose_variant() == "scalar_rgb"  # the real one-pixel checks: LLVM fails, scalar works
    assert "scalar_rgb" in capsys.readouterr().err


@pytest.mark.anny
def test_realistic_split_reads_and_evaluates(tmp_path):
    import torch

    from evaluators.registry import build_evaluator
    from evaluators.runner import run_evaluation, sample_update
    from sapiens2.datasets import open_split
    from sapiens2.datasets.show import contact_sheet
    from sapiens2.datasets.synth import generate_split
    from sapiens2.datasets.synth.realistic.sample import RealisticSettings
    from sapiens2.datasets.synth.writer import split_key
    from sapiens2.tasks import get_task

    settings = RealisticSettings(mode="fast", max_people=2)
    split = generate_split(tmp_path / "real", n=2, seed=3, size=HW, progress=False, generator=settings)
    info = json.loads((split / "split.json").read_text())
    assert info["generator"] == "sapiens2-bench synth realistic" and info["render"]["mode"] == "fast"
    assert split_key("x", 2, HW, 3, settings) != split_key("x", 2, HW, 3)
    for name in ("seg", "normal", "pointmap", "albedo"):
        spec = get_task(name)
        ds = open_split(split, name)
        samples = [ds[i] for i in range(len(ds))]
        pred = torch.stack([torch.as_tensor(s[spec.feed.gt_key]) for s in samples])
        labels = spec.feed.kind == "labels"
        res = run_evaluation(build_evaluator(name), [sample_update(
            name, pred if labels else pred.float(), samples, pred_is_labels=labels)])
        perfect = {"seg": 100.0, "normal": 0.0, "pointmap": 0.0, "albedo": 0.0}[name]
        assert res.metrics[spec.headline] == pytest.approx(perfect, abs=1e-3), name
    pose = open_split(split, "pose", input_size=(96, 128))
    anns = [a for a in json.loads((split / "pose.json").read_text())["annotations"] if a["num_keypoints"] > 0]
    assert len(pose) == len(anns) >= 1
    for j, ann in enumerate(anns):  # the reader returns the written visibilities
        written = np.asarray(ann["keypoints"]).reshape(-1, 3)[:, 2].astype(np.int64)
        np.testing.assert_array_equal(pose[j]["visibility"].numpy(), written)
    assert sum(int((np.asarray(a["keypoints"])[2::3] == 2).sum()) for a in anns) > 5
    assert contact_sheet(split, tmp_path / "sheet.png", n=2, tile_height=64).is_file()


@pytest.mark.anny
def test_anny_people_keypoints_lie_on_their_surfaces_label(mi):
    """Every visible keypoint of an anny person sees, within 2 pixels, a class of its nearest faces."""
    from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people
    from sapiens2.datasets.synth.realistic.scene import compose_scene

    hw, checked, hidden = (256, 192), 0, 0
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        people = sample_people(rng, 2, PeopleSettings())
        scene = compose_scene(rng, hw, people, max_objects=1)
        r = _render(scene, mi)
        m, p, K = r["mask"], r["pointmap"].astype(np.float64), r["K"]
        v, u = np.nonzero(m)
        np.testing.assert_allclose(K[0, 0] * p[m][:, 0] / p[m][:, 2] + K[0, 2], u, atol=1e-3)
        for entry in r["people"]:
            person, kp = people[entry["person"]], entry["keypoints"]
            centroids = person.vertices[person.faces].mean(1)
            z = scene.camera.to_camera(person.keypoints)[:, 2]
            assert (kp[~person.keypoint_defined, 2] == 0).all()
            for j in np.nonzero(kp[:, 2] > 0)[0]:
                x, y = int(round(kp[j, 0])), int(round(kp[j, 1]))
                if kp[j, 2] == 1:  # occluded: some surface at its pixel lies in front of it
                    assert r["zbuffer"][y, x] < z[j]
                    hidden += 1
                    continue
                d = np.linalg.norm(centroids - person.keypoints[j], axis=1)
                near = set(person.face_class[d < d.min() + 0.03].tolist())
                seen = set(r["label"][max(y - 2, 0):y + 3, max(x - 2, 0):x + 3].ravel().tolist())
                assert near & seen, f"keypoint {j}: nearest classes {near}, labels around it {seen}"
                checked += 1
    assert checked >= 30 and hidden >= 1, (checked, hidden)


def test_fast_shading_irradiance_of_a_uniform_sky_is_pi_times_its_radiance():
    from sapiens2.datasets.synth.realistic.environment import Environment
    from sapiens2.datasets.synth.realistic.shading import irradiance_table

    env = Environment("test", np.full((64, 128, 3), 0.7, np.float32))
    np.testing.assert_allclose(irradiance_table(env), np.pi * 0.7, rtol=0.02)
    upper = np.zeros((64, 128, 3), np.float32)
    upper[:32] = 1.0  # sky above the horizon only: an upward normal sees pi, a downward one nothing
    table = irradiance_table(Environment("test", upper))
    assert table[0].mean() == pytest.approx(np.pi, rel=0.03) and table[-1].max() < 0.05


@pytest.mark.anny
def test_realistic_sample_is_deterministic_and_a_failed_split_leaves_nothing(tmp_path, monkeypatch):
    from sapiens2.datasets.synth import generate_split, synth_sample
    from sapiens2.datasets.synth.realistic import sample as realistic

    a, b = realistic.realistic_sample(4, 1, HW), realistic.realistic_sample(4, 1, HW)
    procedural = synth_sample(4, 1, HW)
    assert set(a) == set(procedural) and set(a["people"][0]) == set(procedural["people"][0])
    for key in ("image", "label", "mask", "K"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # The float maps to float32 rounding: once, in the whole suite (not alone), 86 of 36,864 normal
    # components came out one ulp (1.2e-7) apart between two calls; the cause is not yet known.
    for key in ("normal", "pointmap", "albedo"):
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-6, err_msg=key)
    assert not np.array_equal(a["label"], realistic.realistic_sample(4, 2, HW)["label"])
    original = realistic.realistic_sample

    def fails_on_the_second(seed, index, hw, settings=None):
        if index == 1:
            raise RuntimeError("renderer died")
        return original(seed, index, hw, settings)

    monkeypatch.setattr(realistic, "realistic_sample", fails_on_the_second)
    with pytest.raises(RuntimeError, match="renderer died"):
        generate_split(tmp_path / "s", n=3, size=HW, progress=False, generator="realistic")
    assert list(tmp_path.iterdir()) == [], "no split and no temporary folder is left behind"


def test_a_lying_person_is_framed_whole_from_above(mi):
    person = standin_person()
    lie = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # head towards +x, on the floor
    moved = lambda p: p @ lie.T + [-0.8, 0.12, 0.0]  # noqa: E731
    lying = replace(person, vertices=moved(person.vertices), keypoints=moved(person.keypoints))
    scene = _scene(12, people=[lying], framing="head_shoulders")
    assert scene.camera.framing == "full_body" and scene.camera.centre()[1] > 0.5
    kp = _render(scene, mi)["people"][0]["keypoints"]
    assert (kp[lying.keypoint_defined, 2] > 0).all(), "every defined keypoint lies inside the image"
