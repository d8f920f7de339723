"""What the realistic generator cannot produce: seg classes no face ever carries, keypoints never labelled.

The keypoints come from the build table ``sapiens2/data/anny_keypoints308.json`` (rule
``undefined``, each with its reason); the classes are stated here, each with its reason, and checked
against sampled people by ``tests/sapiens2/datasets/synth/realistic/test_limits.py``.
``docs/synthetic_data.md`` shows both lists as generated blocks (``benchmarks/docs_tables.py``).

Example:
    >>> sorted(NEVER_PRODUCED_CLASSES)
    ['Lower_Teeth', 'Upper_Teeth']
    >>> len(undefined_keypoints())
    64
"""

from __future__ import annotations

import json

from sapiens2.reference import DATA_DIR

# seg_classes29 name -> why no face of a realistic person ever has that class
NEVER_PRODUCED_CLASSES: dict[str, str] = {
    "Lower_Teeth": "anny's body mesh has no teeth: its body-part map (segmentation/"
                   "body_parts_segmentation.yaml) has a tongue and a mouth cavity but no teeth, and "
                   "MakeHuman's teeth are separate helper meshes anny does not ship as part of the body",
    "Upper_Teeth": "as Lower_Teeth: no teeth geometry in anny's body mesh",
}


def undefined_keypoints() -> list[tuple[int, str, str]]:
    """(keypoints308 id, name, reason) of every keypoint the anny mesh cannot define (always v = 0)."""
    table = json.loads((DATA_DIR / "anny_keypoints308.json").read_text(encoding="utf-8"))
    out = []
    for k in table["keypoints"]:
        if k["rule"] == "undefined":
            if not k.get("reason"):
                raise ValueError(f"anny_keypoints308.json: keypoint {k['index']} {k['name']!r} is undefined "
                                 "without a reason")
            out.append((int(k["index"]), str(k["name"]), str(k["reason"])))
    return out
