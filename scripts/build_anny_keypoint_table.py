"""Build sapiens2/data/anny_keypoints308.json: where each Sapiens2 keypoint lies on anny's body.

Run once (``PYTHONPATH=. python scripts/build_anny_keypoint_table.py``); the generator only reads the
JSON. Every rule works on anny's rest mesh at the default phenotype (all values 0.5) in anny's own
frame (x = the person's left, -y = forward, z = up) and picks vertices by anatomical description, so
the choice is reproducible and explained in the entry's ``how``. Points the mesh cannot define get
``rule: undefined`` and a ``reason``: they are unlabelled, never guessed.

The 17 COCO body points (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles) follow
anny's own COCO keypoint regressor (rule ``anny_coco``): COCO's points are where annotators click,
not anatomical joint centres, and the regressor is the body model's authors' placement of them on
this mesh (on the mean body it puts the shoulder about 2 cm above the rig's glenohumeral centre and
the ankle about 2 cm above the rig's ankle bone head). Scored against the same MediaPipe
predictions on the same renders, it agrees better with a model trained on such annotations than
the rig joints and tip vertices did (benchmarks/results/references/mediapipe_keypoint_definitions.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sapiens2.datasets.synth.realistic import bodies, face_table  # noqa: E402
from sapiens2.reference import DATA_DIR, keypoints308  # noqa: E402

SIDES = {"left": "L", "right": "R"}
HAND_FINGERS = {"thumb": 1, "forefinger": 2, "middle_finger": 3, "ring_finger": 4, "pinky_finger": 5}
# keypoint stem -> (bone stem, what it is); the bone's head is the joint centre
BODY_JOINTS = {
    "shoulder": ("upperarm01", "glenohumeral joint centre"),
    "elbow": ("lowerarm01", "elbow joint centre"),
    "wrist": ("wrist", "wrist joint centre"),
    "hip": ("upperleg01", "hip joint centre"),
    "knee": ("lowerleg01", "knee joint centre"),
    "ankle": ("foot", "ankle joint centre"),
}


class Mesh:
    """The rest mesh, its per-vertex dominant bone and the rest joint centres (anny frame)."""

    def __init__(self) -> None:
        import torch

        m = bodies.anny_model()
        out = m(phenotype_kwargs=torch.full((1, len(bodies.PHENOTYPES)), 0.5, dtype=m.dtype))
        self.v = out["rest_vertices"][0].numpy()
        self.heads = out["rest_bone_heads"][0].numpy()
        self.index = bodies.bone_index()
        self.dominant = bodies.dominant_bone()

    def head(self, bone: str) -> np.ndarray:
        return self.heads[self.index[bone]]

    def of_bones(self, *bones: str) -> np.ndarray:
        ids = [self.index[b] for b in bones]
        return np.flatnonzero(np.isin(self.dominant, ids))


COCO_BODY = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
             "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
             "right_knee", "left_ankle", "right_ankle")


def anny_coco(name: str) -> dict:
    """A COCO body point from anny's COCO regressor (a vertex blend: a point inside the body)."""
    return {"rule": "anny_coco", "label": name, "surface": False,
            "how": f"anny's COCO keypoint regressor, label {name} (anny.keypoints.KeypointsRegressor.coco: a "
                   "fixed blend of body vertices placing COCO's annotated point); inside the body, so its "
                   "visibility is an interior point's"}


def joint(bone: str, how: str) -> dict:
    return {"rule": "joint", "bone": bone, "surface": False, "how": f"head of rig bone {bone}: {how}"}


def vertex(v: int, how: str) -> dict:
    return {"rule": "vertex", "vertices": [int(v)], "surface": True, "how": how}


def fingertip(mesh: Mesh, bone: str) -> dict:
    cand = mesh.of_bones(bone)
    far = cand[np.argmax(np.linalg.norm(mesh.v[cand] - mesh.head(bone), axis=1))]
    return vertex(far, f"vertex of the {bone} skin farthest from that bone's head: the fingertip")


def body_entries(mesh: Mesh) -> dict[str, dict]:
    out: dict[str, dict] = {}
    head_ids = mesh.of_bones("head")
    mid = head_ids[np.abs(mesh.v[head_ids, 0]) < 0.003]
    out["nose"] = vertex(mid[np.argmin(mesh.v[mid, 1])],
                         "the most anterior head vertex on the midline (|x| < 3 mm): the nose tip")
    for side, s in SIDES.items():
        ear = face_table.ear_vertices(mesh.v, s)
        centre = mesh.v[ear].mean(axis=0)
        out[f"{side}_ear"] = vertex(ear[np.argmin(np.linalg.norm(mesh.v[ear] - centre, axis=1))],
                                    "the ear-mask vertex nearest the ear mask's centroid (anny's mpfb_ears)")
        for stem, (bone, how) in BODY_JOINTS.items():
            out[f"{side}_{stem}"] = joint(f"{bone}.{s}", how)
        big = mesh.of_bones(f"toe1-2.{s}")
        out[f"{side}_big_toe"] = vertex(big[np.argmin(mesh.v[big, 1])],
                                        "the most anterior vertex of the big toe")
        small = mesh.of_bones(f"toe5-3.{s}")
        out[f"{side}_small_toe"] = vertex(small[np.argmin(mesh.v[small, 1])],
                                          "the most anterior vertex of the little toe")
        foot = mesh.of_bones(f"foot.{s}")
        low = foot[mesh.v[foot, 2] < mesh.v[foot, 2].min() + 0.03]
        out[f"{side}_heel"] = vertex(low[np.argmax(mesh.v[low, 1])],
                                     "the most posterior foot vertex within 3 cm of the sole: the heel")
        out.update(hand_entries(mesh, side, s))
        out.update(arm_surface_entries(mesh, side, s))
    out["neck"] = joint("neck01", "the base of the neck (the joint between the thorax and the neck)")
    return out


def hand_entries(mesh: Mesh, side: str, s: str) -> dict[str, dict]:
    out = {}
    for finger, k in HAND_FINGERS.items():
        out[f"{side}_{finger}4"] = fingertip(mesh, f"finger{k}-3.{s}")
        joints = ("carpometacarpal", "metacarpophalangeal", "interphalangeal") if k == 1 else (
            "metacarpophalangeal", "proximal interphalangeal", "distal interphalangeal")
        out[f"{side}_{finger}_third_joint"] = joint(f"finger{k}-1.{s}", joints[0] + " joint centre")
        out[f"{side}_{finger}2"] = joint(f"finger{k}-2.{s}", joints[1] + " joint centre")
        out[f"{side}_{finger}3"] = joint(f"finger{k}-3.{s}", joints[2] + " joint centre")
    return out


def arm_surface_entries(mesh: Mesh, side: str, s: str) -> dict[str, dict]:
    elbow = mesh.head(f"lowerarm01.{s}")
    axis = mesh.head(f"wrist.{s}") - mesh.head(f"upperarm01.{s}")
    axis /= np.linalg.norm(axis)
    arm = mesh.of_bones(f"upperarm02.{s}", f"lowerarm01.{s}", f"upperarm01.{s}")
    near = arm[np.abs((mesh.v[arm] - elbow) @ axis) < 0.01]
    out = {
        f"{side}_olecranon": vertex(near[np.argmax(mesh.v[near, 1])],
                                    "the most posterior arm vertex within 1 cm of the elbow joint's plane "
                                    "across the arm: the olecranon"),
        f"{side}_cubital_fossa": vertex(near[np.argmin(mesh.v[near, 1])],
                                        "the most anterior arm vertex within 1 cm of the elbow joint's plane "
                                        "across the arm: the cubital fossa"),
    }
    shoulder = mesh.head(f"upperarm01.{s}")
    top = mesh.of_bones(f"shoulder01.{s}", f"clavicle.{s}", f"upperarm01.{s}")
    top = top[np.abs(mesh.v[top, 0] - shoulder[0]) < 0.015]
    out[f"{side}_acromion"] = vertex(top[np.argmax(mesh.v[top, 2])],
                                     "the highest shoulder vertex within 1.5 cm (across the body) of the "
                                     "shoulder joint centre: the acromion's skin point")
    return out


def main() -> None:
    mesh = Mesh()
    entries = body_entries(mesh)
    entries.update(face_table.face_entries(mesh))  # also left_eye/right_eye (the pupil centres)
    entries.update({name: anny_coco(name) for name in COCO_BODY})  # the COCO convention (module doc)
    rows = []
    for k in keypoints308()["keypoints"]:
        e = entries.get(k["name"])
        if e is None:
            raise SystemExit(f"no rule for keypoint {k['id']} {k['name']}")
        rows.append({"index": k["id"], "name": k["name"], **e})
    table = {
        "description": "Sapiens2 keypoints308 on anny's body mesh (see scripts/build_anny_keypoint_table.py)",
        "anny_version": __import__("anny").__version__,
        "mesh_vertices": int(len(mesh.v)),
        "frame": "anny rest mesh at the default phenotype; x = the person's left, -y = forward, z = up",
        "defined": sum(r["rule"] != "undefined" for r in rows),
        "eyebrows": {s.upper(): face_table.eyebrows(mesh, s)[1] for s in ("l", "r")},
        "keypoints": rows,
    }
    path = DATA_DIR / "anny_keypoints308.json"
    path.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}: {table['defined']} of {len(rows)} keypoints defined")


if __name__ == "__main__":
    main()
