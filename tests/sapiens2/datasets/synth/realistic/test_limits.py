"""docs/synthetic_data.md's list of what the realistic generator cannot produce equals the code's.

The generated blocks themselves are kept current by tests/benchmarks/test_docs_tables.py; here: the list names
every undefined keypoint of the build table and every never-produced class, the table and the
limits module agree, and (with anny) sampled people really never carry those classes or points.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import docs_tables
from sapiens2.datasets.synth.realistic.limits import NEVER_PRODUCED_CLASSES, undefined_keypoints
from sapiens2.reference import DATA_DIR, keypoints308, seg_classes29

DOC = Path(__file__).resolve().parents[5] / "docs" / "synthetic_data.md"


def _listed_keypoints(block: str) -> set[tuple[str, int]]:
    return {(name, int(idx)) for name, idx in re.findall(r"`([a-z0-9_]+)` \((\d+)\)", block)}


def test_the_docs_list_every_undefined_keypoint_and_never_produced_class():
    block = docs_tables.current_block("realistic-limits")
    assert block == docs_tables.expected_block("realistic-limits")
    expected = {(name, idx) for idx, name, _ in undefined_keypoints()}
    assert _listed_keypoints(block) == expected
    listed_classes = set(re.findall(r"^\| `([A-Za-z_]+)` \|", block, flags=re.M))
    assert listed_classes == set(NEVER_PRODUCED_CLASSES)
    assert DOC.read_text(encoding="utf-8").count("<!-- generated: realistic-limits") == 1


def test_limits_agree_with_the_keypoint_table_and_the_vocabularies():
    table = json.loads((DATA_DIR / "anny_keypoints308.json").read_text())
    points = undefined_keypoints()
    assert len(points) == 308 - table["defined"] == 64
    names = {k["id"]: k["name"] for k in keypoints308()["keypoints"]}
    assert all(names[idx] == name for idx, name, _ in points)
    assert all(why for _, _, why in points)
    classes = {c["name"] for c in seg_classes29()["classes"]}
    assert set(NEVER_PRODUCED_CLASSES) <= classes and all(NEVER_PRODUCED_CLASSES.values())


def test_an_undefined_keypoint_without_a_reason_is_an_error(tmp_path, monkeypatch):
    from sapiens2.datasets.synth.realistic import limits

    table = json.loads((DATA_DIR / "anny_keypoints308.json").read_text())
    first = next(k for k in table["keypoints"] if k["rule"] == "undefined")
    first["reason"] = ""
    (tmp_path / "anny_keypoints308.json").write_text(json.dumps(table))
    monkeypatch.setattr(limits, "DATA_DIR", tmp_path)
    with pytest.raises(ValueError, match=rf"keypoint {first['index']} '{first['name']}' is undefined"):
        limits.undefined_keypoints()


def _row(condition, body_ap, render):
    groups = {g: {"people": 2, "missed": 1, "body_AP": 0.5} for g in ("cut", "lying", "hidden", "clear")}
    return {"condition": condition, "label": f"{condition} label", "size": "256x192", "render": render,
            "n_images": 4, "n_people": 8, "missed_people": 4, "body_AP": body_ap, "PCK@0.1": 0.75,
            "images_nobody_found": 1, "pose_mask_person_IoU": 0.7, "selfie_mask_person_IoU": 0.8,
            "by_group": groups}


def test_the_realism_table_shows_every_condition_of_the_measurement(tmp_path, monkeypatch):
    from benchmarks import synthetic_docs_tables as T
    from benchmarks.results import write_measurement

    monkeypatch.setattr(T, "ROOT", tmp_path)
    path_render = {"mode": "path", "spp": 64, "max_people": 2}
    rows = [_row("realistic", 0.6789, path_render), _row("procedural", 0.2, None)]
    rows[0]["detections_of_another_person"] = {"detected": 4, "wrong_person": 3}
    kept = {k: v for k, v in rows[0].items()
            if k not in ("label", "render", "by_group", "detections_of_another_person")}
    previous = {"commit": "abc1234", "date": "2026-12-03", "command": "x", "what_changed": "the occluders",
                "conditions": [kept]}
    write_measurement(tmp_path / "m.json", "test", {"conditions": rows, "previous": previous})
    table = T.realism_table("m.json")
    assert ("| realistic label | 256x192 | path, 64 spp | 4 | 8 | 0.679 | 0.750 | 4 | 3 of 4 | 1 of 4 | "
            "0.700 | 0.800 |") in table
    assert ("| procedural label | 256x192 | procedural ray caster | 4 | 8 | 0.200 | 0.750 | 4 | - | "
            "1 of 4 |") in table
    assert table.count("1 of 2 missed, AP 0.500") == 8
    assert "commit abc1234; changed since: the occluders" in table
    assert "| realistic | 256x192 | 4 | 8 | 0.679 | 0.750 | 4 | 1 of 4 |" in table


@pytest.mark.anny
def test_sampled_people_never_carry_the_listed_classes_or_points():
    from sapiens2.datasets.synth.realistic.people import PeopleSettings, sample_people

    ids = {c["name"]: c["id"] for c in seg_classes29()["classes"]}
    never = {ids[name] for name in NEVER_PRODUCED_CLASSES}
    undefined = np.zeros(308, bool)
    undefined[[idx for idx, _, _ in undefined_keypoints()]] = True
    seen: set[int] = set()
    for seed in range(3):
        for person in sample_people(np.random.default_rng(seed), 2, PeopleSettings()):
            classes = set(np.unique(person.face_class).tolist())
            assert not classes & never, (seed, person.name)
            np.testing.assert_array_equal(~person.keypoint_defined, undefined)
            seen |= classes
    # the body classes are all there: what is missing is only what the docs list, or drawn at random
    random_extras = {ids[n] for n in ("Apparel", "Eyeglass", "Left_Sock", "Right_Sock", "Left_Shoe",
                                      "Right_Shoe", "Left_Foot", "Right_Foot", "Hair", "Torso",
                                      "Upper_Clothing", "Lower_Clothing")}
    body = set(range(1, 29)) - never - random_extras
    assert body <= seen, sorted(body - seen)
