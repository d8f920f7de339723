"""The realistic generator's scene mixes: declared consistently, and honoured by the scene sampler."""

from __future__ import annotations

import numpy as np
import pytest
from _realistic_standin import standin_person

from sapiens2.datasets.synth.realistic import mixes
from sapiens2.datasets.synth.realistic.camera import FRAMINGS
from sapiens2.datasets.synth.realistic.occluders import cover_fraction
from sapiens2.datasets.synth.realistic.poses import POSES
from sapiens2.datasets.synth.realistic.sample import RealisticSettings, realistic_scene, sample_rng

HW = (128, 96)
SCENERY = {"ground", "wall"}


@pytest.mark.parametrize("name", mixes.SCENES)
def test_every_mix_is_a_valid_setting(name):
    mix = mixes.SCENE_MIXES[name]
    assert set(mix.pose_names) <= set(POSES)
    assert mix.framing is None or mix.framing in FRAMINGS
    assert mix.max_objects >= 0 and 0 < mix.max_cover <= 1 and 0 <= mix.facing_share <= 1
    people = mix.people_settings()
    p = people.pose_probabilities()
    if mix.pose_weights is None:
        assert p is None
    else:
        assert set(mix.pose_weights) >= set(mix.pose_names) and np.isclose(p.sum(), 1.0)
    RealisticSettings(scenes=name).check(HW)


def test_procedural_settings_has_the_procedural_pose_families_and_no_floor_poses():
    w = mixes.PROCEDURAL_POSE_WEIGHTS
    assert set(w) == set(POSES) and np.isclose(sum(w.values()), 1.0)
    assert all(w[k] == 0 for k in ("sit_floor", "kneel", "lie", "lie_side"))
    assert np.isclose(w["stand"], 0.25) and np.isclose(w["walk"], 0.25) and np.isclose(w["crouch"], 0.1)
    assert np.isclose(w["arms_up"] + w["wave"] + w["reach"], 0.2)


@pytest.mark.parametrize("name", mixes.SCENES)
def test_the_scene_sampler_honours_framing_and_occluders(name):
    mix = mixes.SCENE_MIXES[name]
    settings = RealisticSettings(scenes=name)
    framings, most_objects = set(), 0
    for index in range(12):
        scene = realistic_scene(sample_rng(1, index), HW, settings, lambda rng, n: [standin_person()])
        framings.add(scene.camera.framing)
        objects = [m for m in scene.meshes if m.person < 0 and m.name not in SCENERY]
        # chairs are several meshes with one name stem: count objects by stem
        stems = {m.name.split("_")[0] for m in objects}
        most_objects = max(most_objects, len(stems))
        person = scene.meshes[0].vertices
        for stem in stems:
            parts = [m for m in objects if m.name.split("_")[0] == stem]
            assert cover_fraction(scene.camera, person, parts) <= mix.max_cover + 1e-9, (name, index, stem)
    assert most_objects <= mix.max_objects
    if mix.framing is not None:
        assert framings == {mix.framing}
    else:
        assert len(framings) > 1, f"{name}: 12 scenes drew only {framings}"


def test_unknown_mix_is_an_error_naming_it():
    with pytest.raises(ValueError, match="scenes 'hard'"):
        RealisticSettings(scenes="hard").check()
