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
