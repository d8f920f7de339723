"""mmpose's MPII JSON as a COCO keypoint dict (``data import mpii``, :mod:`sapiens2.datasets.importers`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sapiens2.utils_io import read_json

from .import_paths import image_path
from .io import DatasetError

MPII_PIXEL_STD = 200.0  # MPII's scale unit: scale x 200 = person height in pixels


def read_mpii(src: Path, images_dir: Path, headboxes: Path | None = None) -> dict:
    """mmpose's MPII JSON (``image, center, scale, joints, joints_vis``) as a COCO keypoint dict.

    MPII's annotations are 1-based (MATLAB): joints and centres become 0-based image pixels. The
    person box is mmpose's: a square of side ``scale * 200`` around the centre moved down by
    ``15 * scale`` pixels. ``headboxes`` (MPII's ``mpii_gt_val.mat``, ``headboxes_src`` 2 x 2 x N,
    one per record in order) adds each annotation's ``head_size`` (0.6 x head-box diagonal) for PCKh.
    """
    recs = read_json(src)
    if not isinstance(recs, list) or not recs:
        raise DatasetError(f"{src}: mmpose's MPII JSON is a non-empty list of records")
    heads = None
    if headboxes is not None:
        from scipy.io import loadmat

        try:
            boxes = np.asarray(loadmat(str(headboxes))["headboxes_src"], dtype=np.float64)
        except (OSError, KeyError, ValueError) as e:
            raise DatasetError(f"{headboxes}: cannot read 'headboxes_src' from the .mat file ({e})") from None
        if boxes.shape[:2] != (2, 2) or boxes.shape[2] != len(recs):
            raise DatasetError(
                f"{headboxes}: headboxes_src is {boxes.shape}, expected 2 x 2 x {len(recs)} (one per record)"
            )
        heads = 0.6 * np.linalg.norm(boxes[1] - boxes[0], axis=0)
    images: dict[str, dict] = {}
    anns = []
    for i, r in enumerate(recs):
        where = f"{src}: record {i} ({r.get('image', '?') if isinstance(r, dict) else '?'})"
        if not isinstance(r, dict) or any(
            k not in r for k in ("image", "center", "scale", "joints", "joints_vis")
        ):
            raise DatasetError(f"{where}: needs 'image', 'center', 'scale', 'joints', 'joints_vis'")
        joints = np.asarray(r["joints"], dtype=np.float64)
        vis = np.asarray(r["joints_vis"], dtype=np.float64).reshape(-1)
        if joints.shape != (16, 2) or vis.shape != (16,):
            raise DatasetError(f"{where}: expected 16 joints (16 x 2) and 16 joints_vis, got {joints.shape}")
        if r["image"] not in images:
            path = image_path(images_dir, r["image"], where)
            images[r["image"]] = {"id": len(images) + 1, "file_name": str(path)}
        side = float(r["scale"]) * MPII_PIXEL_STD
        cx, cy = (float(v) for v in r["center"])
        cy += 15.0 * float(r["scale"])
        cx, cy = cx - 1.0, cy - 1.0
        kps = np.zeros((16, 3))
        lab = vis > 0
        kps[lab, :2] = joints[lab] - 1.0
        kps[lab, 2] = 2
        ann = {"id": i + 1, "image_id": images[r["image"]]["id"], "category_id": 1, "iscrowd": 0,
               "bbox": [cx - side / 2, cy - side / 2, side, side], "area": side * side * 0.53,
               "keypoints": kps.reshape(-1).tolist()}  # fmt: skip
        if heads is not None:
            ann["head_size"] = float(heads[i])
        anns.append(ann)
    stems = [Path(name).stem for name in images]
    if all(st.isdigit() for st in stems) and len({int(st) for st in stems}) == len(stems):
        ids = {i["id"]: int(st) for i, st in zip(images.values(), stems)}  # MPII's numeric names as ids
        for im in images.values():
            im["id"] = ids[im["id"]]
        for ann in anns:
            ann["image_id"] = ids[ann["image_id"]]
    return {"images": list(images.values()), "annotations": anns, "categories": [{"id": 1, "name": "person"}],
            "area_source": "(scale x 200)^2 x 0.53 of mmpose's MPII person box (MPII has no 'area')"}
