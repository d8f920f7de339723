"""Pictures of predictions: skeleton overlay, coloured parts, normal map, depth, albedo.

Every function takes the RGB image (H x W x 3 uint8) and a prediction at image resolution and returns an
RGB uint8 picture (the input and the prediction side by side for dense tasks, then a legend panel:
seg the 29 classes with the share of pixels of each predicted class, pointmap a depth colour bar,
normals the colour key; see :mod:`sapiens2.models.legends`). ``label_random`` stamps a banner on
pictures of randomly initialised models so they cannot be mistaken for real predictions.
"""

from __future__ import annotations

import numpy as np

from sapiens2.models.legends import beside, colorbar_panel, depth_rgb, legend_panel, normal_key_panel
from sapiens2.reference import keypoints308, seg_classes29

RANDOM_BANNER = "RANDOM WEIGHTS - NOT A TRAINED MODEL"


def draw_pose(image: np.ndarray, keypoints: np.ndarray, scores: np.ndarray, score_thr: float = 0.3,
              bbox: tuple[float, float, float, float] | None = None, legend: bool = True) -> np.ndarray:
    """Skeleton of the 308-keypoint vocabulary over ``image``, with its legend beside it.

    Args:
        image: H x W x 3 uint8 RGB.
        keypoints: K x 2 image pixels.
        scores: K confidences; keypoints below ``score_thr`` and their links are not drawn.
        score_thr: minimum score drawn.
        bbox: optional person box (x1, y1, x2, y2) to outline.
        legend: put the legend panel (:func:`pose_legend_panel`) to the right; off to draw several people
            on one picture, which then gets one legend (:func:`with_pose_legend`).

    Returns:
        H x W x 3 uint8 picture (wider by the legend panel when ``legend``).
    """
    import cv2

    vocab = keypoints308()
    out = np.ascontiguousarray(image.copy())
    radius = max(1, round(min(out.shape[:2]) / 200))
    if bbox is not None:
        x1, y1, x2, y2 = (int(round(v)) for v in bbox)
        cv2.rectangle(out, (x1, y1), (x2, y2), (255, 255, 255), radius)
    pts = np.round(np.asarray(keypoints, dtype=np.float64)).astype(int)
    ok = np.asarray(scores) >= score_thr
    for link in vocab["skeleton"]:
        a, b = link["link"]
        if a < len(pts) and b < len(pts) and ok[a] and ok[b]:
            cv2.line(out, tuple(map(int, pts[a])), tuple(map(int, pts[b])), tuple(link["color"]), radius,
                     cv2.LINE_AA)
    colors = [kp.get("color", [255, 0, 0]) for kp in vocab["keypoints"]]
    for i in np.flatnonzero(ok):
        color = tuple(int(c) for c in colors[i]) if i < len(colors) else (255, 0, 0)
        cv2.circle(out, tuple(map(int, pts[i])), radius, color, -1, cv2.LINE_AA)
    return with_pose_legend(out, [scores], score_thr, bbox is not None) if legend else out


_FINGERS = ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky")


def _link_label(pairs: list[tuple[str, str]]) -> str:
    """What the links of one colour join, in words, from their keypoint names (left/right, fingers)."""
    fingers = [f.replace("_", " ") for f in _FINGERS if any(f in n for pair in pairs for n in pair)]
    limbs = [pair for pair in pairs if not any(f in n for f in _FINGERS for n in pair)]
    sides = {n.split("_", 1)[0] for pair in limbs for n in pair}
    parts = []
    if limbs:
        parts.append(f"{sides.pop()} arm, leg, foot" if len(sides) == 1 and sides <= {"left", "right"}
                     else "torso and head")
    if fingers:
        hands = {n.split("_", 1)[0] for pair in pairs if pair not in limbs for n in pair}
        parts.append(", ".join(fingers) + (f" ({hands.pop()} hand)" if len(hands) == 1 else " (both hands)"))
    return "; ".join(parts)


def pose_legend_entries() -> list[tuple[str, tuple[int, int, int]]]:
    """The skeleton's colours and what each joins (from the vocabulary's links and keypoint names).

    Example:
        >>> [name for name, _ in pose_legend_entries()][:2]
        ['left arm, leg, foot; pinky (both hands)', 'right arm, leg, foot; thumb (both hands)']
    """
    vocab = keypoints308()
    names = {kp["id"]: kp["name"] for kp in vocab["keypoints"]}
    by_colour: dict[tuple[int, int, int], list[tuple[str, str]]] = {}
    for link in vocab["skeleton"]:
        a, b = link["link"]
        by_colour.setdefault(tuple(int(c) for c in link["color"]), []).append((names[a], names[b]))
    return [(_link_label(pairs), colour) for colour, pairs in by_colour.items()]


def with_pose_legend(picture: np.ndarray, scores: list, score_thr: float, box: bool) -> np.ndarray:
    """``picture`` with the pose legend beside it: link colours, keypoints drawn, the box.

    Args:
        picture: the drawn picture.
        scores: each person's K keypoint scores.
        score_thr: the score threshold the picture was drawn with.
        box: whether person boxes were outlined.
    """
    drawn = sum(int((np.asarray(s) >= score_thr).sum()) for s in scores)
    total = sum(len(s) for s in scores)
    entries = pose_legend_entries() + [("face keypoints (dots)", (200, 200, 0))]
    if box:
        entries.append(("person box (white)", (255, 255, 255)))
    title = (f"{drawn} of {total} keypoints drawn\n(score >= {score_thr:g}); "
             f"{len(scores)} {'person' if len(scores) == 1 else 'people'}\nlinks:")
    return beside(picture, legend_panel(entries, picture.shape[0], title=title))


def seg_palette() -> np.ndarray:
    """29 x 3 uint8 class colours of ``seg_classes29.json``."""
    classes = seg_classes29()["classes"]
    palette = np.zeros((len(classes), 3), np.uint8)
    for c in classes:
        palette[c["id"]] = c["color"]
    return palette


def seg_legend_entries(labels: np.ndarray | None = None) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, colour) of the 29 classes; with ``labels``, each present class gets its pixel share.

    Example:
        >>> seg_legend_entries(np.array([[0, 0, 4, 4]]))[4][0]
        'Hair 50.0%'
    """
    classes = sorted(seg_classes29()["classes"], key=lambda c: c["id"])
    share = None
    if labels is not None:
        counts = np.bincount(np.asarray(labels).reshape(-1).astype(np.int64).clip(0, 255), minlength=256)
        share = counts / max(1, counts[: len(classes)].sum())
    out = []
    for c in classes:
        name = c["name"]
        if share is not None and share[c["id"]] > 0:
            name += f" {share[c['id']] * 100:.1f}%"
        out.append((name, tuple(int(v) for v in c["color"])))
    return out


def draw_seg(image: np.ndarray, labels: np.ndarray, alpha: float = 0.6) -> np.ndarray:
    """Input and the part labels blended over it in the class colours, side by side, with the legend."""
    palette = seg_palette()
    colored = palette[np.clip(labels, 0, len(palette) - 1)]
    blend = (alpha * colored + (1 - alpha) * image).astype(np.uint8)
    panel = legend_panel(seg_legend_entries(labels), image.shape[0], title="class (share of pixels)")
    return beside(side_by_side(image, blend), panel)


def draw_normal(image: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Unit normals (3 x H x W, camera frame) as RGB ``(n + 1) / 2``, next to the input, with the key."""
    rgb = ((np.transpose(normals, (1, 2, 0)) + 1.0) * 127.5).clip(0, 255).astype(np.uint8)
    return beside(side_by_side(image, rgb), normal_key_panel(image.shape[0]))


def draw_depth(image: np.ndarray, points: np.ndarray,
               label: str = "depth z (m)\ncanonical camera f = 768 px") -> np.ndarray:
    """Depth (z of a 3 x H x W pointmap) between its 2nd and 98th percentile, with a colour bar."""
    z = np.asarray(points[2], dtype=np.float64)
    finite = np.isfinite(z)
    lo, hi = (np.percentile(z[finite], [2, 98]) if finite.any() else (0.0, 1.0))
    rgb = depth_rgb(z, float(lo), float(hi), finite)
    return beside(side_by_side(image, rgb), colorbar_panel(float(lo), float(hi), label, image.shape[0]))


def draw_albedo(image: np.ndarray, albedo: np.ndarray) -> np.ndarray:
    """Albedo (3 x H x W in [0, 1]) as RGB, next to the input (its colours are the values: no legend)."""
    rgb = (np.transpose(albedo, (1, 2, 0)).clip(0, 1) * 255).round().astype(np.uint8)
    return side_by_side(image, rgb)


def side_by_side(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Concatenate two H x W x 3 pictures horizontally with a 4-pixel white gap."""
    gap = np.full((left.shape[0], 4, 3), 255, np.uint8)
    return np.concatenate([left, gap, right], axis=1)


def label_random(picture: np.ndarray) -> np.ndarray:
    """Stamp :data:`RANDOM_BANNER` in a red bar on top of ``picture``."""
    import cv2

    h, w = picture.shape[:2]
    scale = max(0.3, w / 1400)
    thickness = max(1, round(scale * 2))
    (tw, th), base = cv2.getTextSize(RANDOM_BANNER, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    bar = np.zeros((th + base + 8, w, 3), np.uint8)
    bar[:] = (200, 0, 0)
    cv2.putText(bar, RANDOM_BANNER, (max(2, (w - tw) // 2), th + 4), cv2.FONT_HERSHEY_SIMPLEX, scale,
                (255, 255, 255), thickness, cv2.LINE_AA)
    return np.concatenate([bar, picture], axis=0)
