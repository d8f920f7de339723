"""Visibility of an anny person's interior joints agrees with what the camera sees.

An anny body standing in its named ``stand`` pose, seen by a camera placed by hand: from the front
every limb joint (shoulders to ankles) is seen (v = 2); a box in front of the hips hides the hips
and knees (v = 1, the box at their pixels); seen in profile the far shoulder and hip are hidden by
the body itself while the near ones are seen.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.mitsuba, pytest.mark.anny]
HW = (192, 144)
LIMB_JOINTS = {"left_shoulder": 5, "right_shoulder": 6, "left_elbow": 7, "right_elbow": 8, "left_hip": 9,
               "right_hip": 10, "left_knee": 11, "right_knee": 12, "left_ankle": 13, "right_ankle": 14,
               "left_wrist": 62, "right_wrist": 41}


@pytest.fixture(scope="module")
def mi():
    from sapiens2.datasets.synth.realistic.variant import load_mitsuba

    return load_mitsuba(threads=2)


@pytest.fixture(scope="module")
def person():
    from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people

    settings = PeopleSettings(pose_names=("stand",), perturb_scale=0.0, age_range=(0.6, 0.7))
    return sample_people(np.random.default_rng(3), 1, settings)[0]


def _facing(person) -> np.ndarray:
    """The horizontal direction the person faces (from the shoulders and the nose)."""
    kp = person.keypoints
    across = kp[LIMB_JOINTS["left_shoulder"]] - kp[LIMB_JOINTS["right_shoulder"]]
    front = np.cross(across, [0.0, 1.0, 0.0])  # left at +x, facing +z: (x) x (y) = +z
    front[1] = 0.0
    front /= np.linalg.norm(front)
    assert front @ (kp[0] - (kp[5] + kp[6]) / 2) > 0, "the nose lies in front of the shoulders"
    return front


def _keypoints(person, mi, direction: np.ndarray, extra=()):
    """Render the person seen from ``direction`` (horizontal, from the person) and project its points."""
    from sapiens2.datasets.synth.realistic.camera import Camera, intrinsics, look_at
    from sapiens2.datasets.synth.realistic.environment import sample_environment
    from sapiens2.datasets.synth.realistic.render import project_keypoints, render_ground_truth
    from sapiens2.datasets.synth.realistic.scene import RealisticScene, person_keypoints, person_mesh

    centre = np.array([person.vertices[:, 0].mean(), 0.9, person.vertices[:, 2].mean()])
    cam = Camera(intrinsics(HW, 45.0), look_at(centre + 3.2 * direction, centre), HW)
    env = sample_environment(np.random.default_rng(0), centre)
    scene = RealisticScene([person_mesh(person, 0), *extra], [person_keypoints(person)], cam, env)
    gt = render_ground_truth(scene, mi)
    return project_keypoints(scene, gt)[0], gt, scene


def test_every_limb_joint_of_a_person_facing_the_camera_is_seen(person, mi):
    kp, gt, _ = _keypoints(person, mi, _facing(person))
    hidden = [name for name, k in LIMB_JOINTS.items() if kp[k, 2] != 2]
    assert not hidden, f"joints seen from the front but marked hidden: {hidden}"
    for k in LIMB_JOINTS.values():  # and the pixel of each shows the person itself
        assert gt["owner"][int(round(kp[k, 1])), int(round(kp[k, 0]))] == 0


def test_a_box_in_front_of_the_legs_hides_the_hips_and_knees(person, mi):
    from sapiens2.datasets.synth.realistic.occluders import box

    front = _facing(person)
    hips = (person.keypoints[9] + person.keypoints[10]) / 2
    centre = hips + 0.6 * front
    centre[1] = 0.6
    blocker = box("blocker", centre, np.array([0.9, 1.2, 0.05]), float(np.arctan2(front[0], front[2])),
                  np.array([0.5, 0.5, 0.5]))
    kp, gt, _ = _keypoints(person, mi, front, extra=[blocker])
    for name in ("left_hip", "right_hip", "left_knee", "right_knee"):
        k = LIMB_JOINTS[name]
        assert kp[k, 2] == 1, f"{name} behind the box is marked {kp[k, 2]}"
        assert gt["owner"][int(round(kp[k, 1])), int(round(kp[k, 0]))] == -1
    assert kp[LIMB_JOINTS["left_shoulder"], 2] == 2 and kp[0, 2] == 2, "the box stops below the chest"


def test_in_profile_the_far_shoulder_and_hip_are_hidden_by_the_body(person, mi):
    front = _facing(person)
    left = np.cross([0.0, 1.0, 0.0], front)  # the person's left (+x when facing +z)
    kp, _, _ = _keypoints(person, mi, left)
    for name in ("left_shoulder", "left_hip"):
        assert kp[LIMB_JOINTS[name], 2] == 2, f"near {name} (facing the camera) is marked hidden"
    for name in ("right_shoulder", "right_hip"):
        assert kp[LIMB_JOINTS[name], 2] == 1, f"far {name} (behind the trunk) is marked seen"
