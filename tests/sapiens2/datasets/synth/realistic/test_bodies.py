"""The realistic generator's people (sapiens2.datasets.synth.realistic): anny bodies, poses, labels.

Tests marked ``anny`` need anny 0.6.2 and its already built model cache (they never build it: that takes
minutes and about 3 GB; see the marker's skip reason). A module-scoped sample of people is shared.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sapiens2.datasets.synth.realistic import bodies, poses
from sapiens2.reference import DATA_DIR, keypoints308, seg_classes29

N_BODY_VERTICES = 13718


def test_shape_sampling_covers_anny_ranges_and_is_seeded():
    a = [bodies.sample_shape(np.random.default_rng(3)).values for _ in range(2)]
    assert a[0] == a[1]
    rng = np.random.default_rng(0)
    shapes = np.array([bodies.sample_shape(rng).values for _ in range(400)])
    names = list(bodies.PHENOTYPES)
    for name in ("gender", "muscle", "weight", "height", "proportions", "cupsize", "firmness"):
        col = shapes[:, names.index(name)]
        assert col.min() < 0.03 and col.max() > 0.97, name
    age = shapes[:, names.index("age")]
    assert age.min() >= 1 / 6 and age.max() <= 1.0 and age.min() < 0.2 and age.max() > 0.97
    ethnic = shapes[:, -3:]
    np.testing.assert_allclose(ethnic.sum(axis=1), 1.0, atol=1e-12)
    assert (ethnic.max(axis=0) > 0.95).all(), "each ancestry should occur almost pure"
    with pytest.raises(ValueError, match="age_range"):
        bodies.sample_shape(rng, age_range=(-1.0, 0.5))


def test_keypoint_table_documents_every_point():
    table = json.loads((DATA_DIR / "anny_keypoints308.json").read_text())
    names = [k["name"] for k in keypoints308()["keypoints"]]
    assert [e["name"] for e in table["keypoints"]] == names
    for e in table["keypoints"]:
        if e["rule"] == "undefined":
            assert len(e["reason"]) > 20, e["name"]
        else:
            assert len(e["how"]) > 20 and isinstance(e["surface"], bool), e["name"]
    assert table["defined"] == sum(e["rule"] != "undefined" for e in table["keypoints"])


@pytest.fixture(scope="module")
def people():
    from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people

    settings = PeopleSettings()
    return settings, sample_people(np.random.default_rng(11), 4, settings)


@pytest.mark.anny
def test_same_seed_same_people():
    from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people

    a, b = (sample_people(np.random.default_rng(5), 2, PeopleSettings()) for _ in range(2))
    for p, q in zip(a, b):
        for field in ("vertices", "faces", "face_class", "vertex_albedo", "keypoints", "keypoint_defined"):
            np.testing.assert_array_equal(getattr(p, field), getattr(q, field))
    c = sample_people(np.random.default_rng(6), 2, PeopleSettings())
    assert not np.array_equal(a[0].vertices[:100], c[0].vertices[:100])


@pytest.mark.anny
def test_people_stand_on_the_floor_apart_with_valid_arrays(people):
    settings, ps = people
    valid = {c["id"] for c in seg_classes29()["classes"]} - {0}
    boxes = []
    for p in ps:
        assert p.vertices.dtype == np.float64 and p.faces.shape[1] == 3 and p.faces.max() < len(p.vertices)
        assert p.face_class.dtype == np.uint8 and p.face_class.shape == (len(p.faces),)
        assert set(np.unique(p.face_class)) <= valid, "every face has a non-background seg_classes29 id"
        assert p.vertex_albedo.dtype == np.float32
        assert 0 <= p.vertex_albedo.min() <= p.vertex_albedo.max() <= 1
        assert abs(p.vertices[:, 1].min()) < 1e-9, "the lowest point touches the floor"
        xz = p.vertices[:, [0, 2]]
        boxes.append((xz.min(axis=0), xz.max(axis=0)))
    for i in range(len(boxes)):
        for j in range(i):
            (alo, ahi), (blo, bhi) = boxes[i], boxes[j]
            apart = np.any(alo - settings.gap >= bhi - 1e-9) or np.any(ahi + settings.gap <= blo + 1e-9)
            assert apart, f"person{i} and person{j} overlap on the floor"


@pytest.mark.anny
def test_keypoints_lie_in_the_mesh_bbox_and_undefined_ones_are_zero(people):
    _, ps = people
    for p in ps:
        lo, hi = p.vertices.min(axis=0) - 1e-6, p.vertices.max(axis=0) + 1e-6
        k = p.keypoints[p.keypoint_defined]
        assert ((k >= lo) & (k <= hi)).all(), p.name
        assert (p.keypoints[~p.keypoint_defined] == 0).all()
        assert p.keypoint_defined.sum() >= 240


def _body_keypoints(shape, pose_name):
    from sapiens2.datasets.synth.realistic.keypoints import body_keypoints

    body = bodies.pose_body(shape, poses.named_pose(pose_name).matrices())
    return body, *body_keypoints(body)


@pytest.mark.anny
def test_left_keypoints_and_parts_are_on_the_persons_left():
    """Before the random yaw the person faces +z, so the person's left is +x."""
    from sapiens2.datasets.synth.realistic.parts import body_face_classes, class_ids

    vocab = keypoints308()["keypoints"]
    index = {k["name"]: k["id"] for k in vocab}
    rng = np.random.default_rng(2)
    for pose_name in ("stand", "walk"):
        body, points, defined, _ = _body_keypoints(bodies.sample_shape(rng), pose_name)
        checked = 0
        for k in vocab:
            left = k["name"].startswith(("left_", "l_")) or "_of_l_" in k["name"]
            if left and k["swap"] and defined[k["id"]] and defined[index[k["swap"]]]:
                assert points[k["id"], 0] > points[index[k["swap"]], 0], (pose_name, k["name"])
                checked += 1
        assert checked > 90
        centres = body.vertices[bodies.faces()].mean(axis=1)
        cls = body_face_classes()
        for name, cid in class_ids().items():
            if name.startswith(("left_", "right_")) and (cls == cid).any():
                mean_x = centres[cls == cid, 0].mean()
                assert (mean_x > 0) == name.startswith("left_"), (pose_name, name, mean_x)


@pytest.mark.anny
def test_defined_face_keypoints_lie_on_the_head():
    face_ids = np.array(keypoints308()["parts"]["face"])
    rng = np.random.default_rng(4)
    for pose_name in ("stand", "wave"):
        shape = bodies.sample_shape(rng)
        body, points, defined, _ = _body_keypoints(shape, pose_name)
        head = body.vertices[bodies.dominant_bone() == bodies.bone_index()["head"]]
        lo, hi = head.min(axis=0) - 0.003, head.max(axis=0) + 0.003
        face = points[face_ids[defined[face_ids]]]
        assert len(face) >= 150
        assert ((face >= lo) & (face <= hi)).all(), pose_name
        neck = body.bone_heads[bodies.bone_index()["neck01"]]
        assert (np.linalg.norm(face - neck, axis=1) > 0.05).all()


@pytest.mark.anny
def test_clothing_hair_apparel_and_eyeglasses_classes_appear():
    from sapiens2.datasets.synth.realistic import clothing
    from sapiens2.datasets.synth.realistic.parts import body_face_classes, class_ids

    shape = bodies.sample_shape(np.random.default_rng(1))
    body = bodies.pose_body(shape, poses.named_pose("stand").matrices())
    seen: set[int] = set()
    for seed in range(16):
        dressed = clothing.dress(np.random.default_rng(seed), body, np.array([0.6, 0.45, 0.35]),
                                 body_face_classes(), bodies.faces())
        seen |= set(np.unique(dressed.face_class).tolist())
        assert len(dressed.albedo) == len(dressed.vertices) and dressed.faces.max() < len(dressed.vertices)
    ids = class_ids()
    for name in ("upper_clothing", "lower_clothing", "hair", "apparel", "eyeglass", "left_shoe", "right_shoe",
                 "left_sock", "right_sock", "upper_lip", "lower_lip", "tongue"):
        assert ids[name] in seen, name
    bare = clothing.dress(np.random.default_rng(0), body, np.array([0.6, 0.45, 0.35]), body_face_classes(),
                          bodies.faces(), enabled=False)
    assert not {ids["upper_clothing"], ids["hair"]} & set(np.unique(bare.face_class).tolist())


@pytest.mark.anny
def test_torso_check_catches_an_arm_through_the_belly_and_sampled_people_pass(people):
    from scipy.spatial.transform import Rotation

    settings, ps = people
    for p in ps:
        assert poses.torso_penetration(p.vertices[:N_BODY_VERTICES]) <= settings.max_penetration, p.name
    shape = bodies.BodyShape(tuple([0.5] * 8 + [1 / 3] * 3))
    index = bodies.bone_index()
    rot = poses.named_pose("stand").matrices()
    arm = poses._turns_to_rotvec([("y", 45), ("x", -10), ("z", -60)])  # arm down, turned in
    elbow = poses._turns_to_rotvec([("e", -140)])  # forearm folded into the belly
    rot[index["upperarm01.L"]] = Rotation.from_rotvec(arm).as_matrix()
    rot[index["lowerarm01.L"]] = Rotation.from_rotvec(elbow).as_matrix()
    depth = poses.torso_penetration(bodies.pose_body(shape, rot).vertices)
    assert depth > 0.03


def test_perturbation_stays_within_joint_limits():
    limits = poses.JOINT_LIMITS["upperarm01"]
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.normal(0.0, 3.0, size=3)
        for label in ("upperarm01.L", "upperarm01.R"):
            c = poses.clip_to_limits(label, v)
            left = c * np.array([1.0, -1.0, -1.0]) if label.endswith(".R") else c
            for (lo, hi), x in zip(limits, np.degrees(left)):
                assert lo - 1e-9 <= x <= hi + 1e-9


@pytest.mark.anny
def test_coco_body_points_are_annys_coco_regressor_on_the_posed_body():
    """The 17 COCO points of a posed body are what anny's own regressor gives on anny's own output."""
    import torch
    from anny.keypoints import KeypointsRegressor

    from sapiens2.datasets.synth.realistic.keypoints import body_keypoints

    coco = ["nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
            "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
            "right_knee", "left_ankle", "right_ankle"]
    ids = {k["name"]: k["id"] for k in keypoints308()["keypoints"]}
    shape = bodies.BodyShape(tuple([0.3, 0.8, 0.6, 0.7, 0.4, 0.5, 0.5, 0.5, 0.2, 0.3, 0.5]))
    rot = poses.named_pose("walk").matrices()
    points, defined, surface = body_keypoints(bodies.pose_body(shape, rot))
    m = bodies.anny_model()
    delta = np.tile(np.eye(4), (1, len(m.bone_labels), 1, 1))
    delta[0, :, :3, :3] = rot
    out = m(pose_parameters=torch.from_numpy(delta).to(m.dtype),
            phenotype_kwargs=torch.tensor([shape.values], dtype=m.dtype))
    regressor = KeypointsRegressor.coco(m, labels=coco)
    expected = regressor(out)[0].numpy() @ bodies.ANNY_TO_WORLD.T
    got = points[[ids[n] for n in coco]]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert defined[[ids[n] for n in coco]].all() and not surface[[ids[n] for n in coco]].any()


def test_photo_pose_weights_cover_the_pose_set_and_lying_is_rare():
    assert set(poses.PHOTO_POSE_WEIGHTS) == set(poses.POSES)
    w = poses.PHOTO_POSE_WEIGHTS
    lying = (w["lie"] + w["lie_side"]) / sum(w.values())
    assert 0 < lying < 0.1, lying


def test_scene_mixes_draw_poses_and_yaws_as_declared():
    from sapiens2.datasets.synth.realistic.people import PeopleSettings
    from sapiens2.datasets.synth.realistic.sample import people_settings

    uniform, photo = people_settings("default"), people_settings("photo")
    assert uniform == PeopleSettings(), "the default scenes draw poses and yaws uniformly"
    rng = np.random.default_rng(0)
    names = photo.pose_names
    drawn = [str(rng.choice(names, p=photo.pose_probabilities())) for _ in range(4000)]
    lying = np.mean([d in ("lie", "lie_side") for d in drawn])
    upright = np.mean([d in ("stand", "walk") for d in drawn])
    assert lying < 0.08 and upright > 0.15, (lying, upright)
    # yaw 0 faces the camera's side; the photo scenes turn most people towards it
    facing = lambda s: np.mean([abs((s.draw_yaw(rng) + 180) % 360 - 180) < 60 for _ in range(4000)])  # noqa: E731
    assert facing(photo) > 0.7 and abs(facing(uniform) - 1 / 3) < 0.05
    assert uniform.pose_probabilities() is None
    assert photo.depth_ratio < 1 == uniform.depth_ratio, "photo scenes place people side by side"
    with pytest.raises(ValueError, match="pose_weights"):
        PeopleSettings(pose_names=("stand", "walk"), pose_weights=(1.0,)).pose_probabilities()
