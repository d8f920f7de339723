"""Contact sheet of a split: each image with its ground truth of every task, read through the readers.

Columns: the raw image, the image with the pose skeleton and boxes, the part labels, the normals, the
depth with a colour bar per row (metres, GT z between its 1st and 99th percentile), the albedo. A
footer holds the legends: the 29 part classes and the normal colour key.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sapiens2.datasets.io import read_rgb
from sapiens2.models.legends import colorbar_panel, depth_rgb, legend_panel, normal_key_panel
from sapiens2.models.visualize import seg_legend_entries
from sapiens2.reference import keypoints308, seg_classes29
from sapiens2.utils_io import atomic_write

from .split import available_tasks, open_split

COLUMNS = ("image", "image + skeleton", "parts", "normal", "depth", "albedo")


def _depth_range(z: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    valid = mask & np.isfinite(z)
    if not valid.any():
        return 0.0, 1.0
    lo, hi = np.percentile(z[valid], [1, 99])
    return float(lo), float(max(hi, lo + 1e-6))


def _footer(width: int, labels=None) -> np.ndarray:
    """The legends row: the part classes (the split's label set; default the 29) and the normal colour key."""
    if labels is None or labels.name == "sapiens2_29" or not labels.palette:
        entries = seg_legend_entries()
    else:
        entries = [(n, tuple(c)) for n, c in zip(labels.names, labels.palette)]
    font = 11.0
    ncol = max(1, min(8, (width - 160) // 170))
    rows = -(-len(entries) // ncol)
    panel = legend_panel(entries, int(rows * font * 1.75 + 3 * font) + 8, title="part classes", font_px=font)
    key = normal_key_panel(panel.shape[0], font_px=font)
    h = max(panel.shape[0], key.shape[0])
    row = np.full((h, max(width, panel.shape[1] + key.shape[1]), 3), 255, np.uint8)
    row[: panel.shape[0], : panel.shape[1]] = panel
    row[: key.shape[0], panel.shape[1]: panel.shape[1] + key.shape[1]] = key
    used = np.flatnonzero((row < 250).any(axis=(1, 2)))
    row = row[: used[-1] + 8] if used.size else row
    return row[:, :width] if row.shape[1] > width else row


def _draw_pose(img: np.ndarray, anns: list[dict], scale: float, ks=None) -> np.ndarray:
    from PIL import Image, ImageDraw

    kp = keypoints308()
    if ks is not None and ks.name != "keypoints308":  # another vocabulary: its links, one colour
        kp = {"skeleton": [{"link": list(p), "color": [0, 200, 255]} for p in ks.skeleton],
              "parts": {"face": ks.parts.get("face", [])}}
    im = Image.fromarray(img)
    d = ImageDraw.Draw(im)
    for ann in anns:
        k = np.asarray(ann["keypoints"], dtype=np.float64).reshape(-1, 3)
        xy = k[:, :2] * scale
        x, y, w, h = (v * scale for v in ann["bbox"])
        d.rectangle([x, y, x + w, y + h], outline=(255, 255, 255))
        for link in kp["skeleton"]:
            a, b = link["link"]
            if k[a, 2] > 0 and k[b, 2] > 0:
                d.line([tuple(xy[a]), tuple(xy[b])], fill=tuple(link["color"]), width=2)
        for i in range(len(k)):
            if k[i, 2] > 0:
                r = 1.5 if i in kp["parts"]["face"] else 2.5
                fill = (255, 255, 255) if k[i, 2] == 2 else (90, 90, 90)
                d.ellipse([xy[i, 0] - r, xy[i, 1] - r, xy[i, 0] + r, xy[i, 1] + r], fill=fill)
    return np.asarray(im)


def _resize(arr: np.ndarray, scale: float, nearest: bool = False) -> np.ndarray:
    from PIL import Image

    h, w = arr.shape[:2]
    im = Image.fromarray(arr).resize(
        (round(w * scale), round(h * scale)), Image.NEAREST if nearest else Image.BILINEAR
    )
    return np.asarray(im)


def contact_sheet(
    split_dir: str | os.PathLike, out: str | os.PathLike, n: int = 6, tile_height: int = 320
) -> Path:
    """Write a PNG with one row per image: skeleton, coloured parts, normals, depth, albedo.

    Args:
        split_dir: split folder (``split.json``).
        out: PNG path, outside ``split_dir`` (a file inside would change the split's content hash).
        n: number of images (rows).
        tile_height: height of each tile in pixels.

    Returns:
        The written PNG path.

    Raises:
        ValueError: ``out`` lies inside ``split_dir``.
    """
    from PIL import Image, ImageDraw

    if Path(out).resolve().is_relative_to(Path(split_dir).resolve()):
        raise ValueError(f"{out}: the contact sheet must be written outside the split {split_dir} "
                         "(a file inside it would change the split's content hash)")
    tasks = available_tasks(split_dir)
    readers = {t: open_split(split_dir, t) for t in tasks if t != "pose"}
    pose_ds = open_split(split_dir, "pose") if "pose" in tasks else None
    coco = pose_ds.coco if pose_ds is not None else None
    labels = getattr(readers.get("seg"), "label_set", None)
    ids = next(iter(readers.values())).records if readers else []
    if coco is not None and not ids:
        ids = [{"id": im["id"], "image": im["file_name"]} for im in coco["images"]]
    if not ids:
        raise ValueError(f"{split_dir}: no images to show")

    colours = [c["color"] for c in seg_classes29()["classes"]]
    if labels is not None and labels.name != "sapiens2_29" and labels.palette:
        colours = [list(c) for c in labels.palette]
    palette = np.array(colours + [[255, 255, 255]] * (256 - len(colours)), dtype=np.uint8)
    rows = []
    for row in range(min(n, len(ids))):
        tiles = {}
        base = None
        for task, ds in readers.items():
            s = ds[row]
            img = (s["image"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
            base = img if base is None else base
            if task == "seg":
                lab = s["label"].numpy()
                col = palette[np.clip(lab, 0, 255)]
                tiles["parts"] = np.where(
                    (lab > 0)[..., None], (0.3 * img + 0.7 * col).astype(np.uint8), img // 3
                )
            elif task == "normal":
                m = s["mask"].numpy()[..., None]
                tiles["normal"] = (((s["normal"].permute(1, 2, 0).numpy() + 1) * 127.5) * m).astype(np.uint8)
            elif task == "pointmap":
                z, m = s["pointmap"][2].numpy(), s["mask"].numpy().astype(bool)
                tiles["depth_range"] = _depth_range(z, m)
                tiles["depth"] = depth_rgb(z, *tiles["depth_range"], m)
            elif task == "albedo":
                m = s["mask"].numpy()[..., None]
                tiles["albedo"] = (s["albedo"].permute(1, 2, 0).numpy() * 255 * m).round().astype(np.uint8)
        if base is None:
            base = read_rgb(Path(split_dir) / ids[row]["image"])
        scale = tile_height / base.shape[0]
        raw = _resize(base, scale)
        first = raw.copy()
        if coco is not None:
            file_name = Path(ids[row]["image"]).name
            im_ids = [im["id"] for im in coco["images"] if Path(im["file_name"]).name == file_name]
            anns = [a for a in coco["annotations"] if im_ids and a["image_id"] == im_ids[0]]
            first = _draw_pose(first, anns, scale, pose_ds.keypoint_set)
        cells, starts = [], []
        for name in COLUMNS:
            starts.append(sum(c.shape[1] for c in cells))
            if name in ("image", "image + skeleton"):
                cells.append(raw if name == "image" else first)
                continue
            cells.append(_resize(tiles[name], scale, nearest=True) if name in tiles else np.zeros_like(first))
            if name == "depth":
                bar = (colorbar_panel(*tiles["depth_range"], "GT depth z (m)", first.shape[0])
                       if "depth" in tiles else np.full((first.shape[0], 4, 3), 255, np.uint8))
                cells.append(bar[: first.shape[0]])
        rows.append(np.concatenate(cells, axis=1))
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows]
    header = np.full((24, width, 3), 255, dtype=np.uint8)
    sheet = Image.fromarray(np.concatenate([header] + rows + [_footer(width, labels)], axis=0))
    draw = ImageDraw.Draw(sheet)
    for x, name in zip(starts, COLUMNS):
        draw.text((x + 6, 6), name, fill=(0, 0, 0))
    return atomic_write(Path(out), lambda tmp: sheet.save(tmp, format="PNG"))


def default_sheet_path(split_dir: str | os.PathLike) -> Path:
    """Where ``data show`` writes by default: beside the split, ``<parent>/<split name>_contact_sheet.png``.

    Example:
        >>> default_sheet_path("/data/synth/test").as_posix()
        '/data/synth/test_contact_sheet.png'
    """
    root = Path(split_dir).resolve()
    return root.parent / f"{root.name}_contact_sheet.png"
