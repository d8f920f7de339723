"""A person box from MediaPipe for ``predict --task pose --bbox mediapipe``.

MediaPipe's pose solution runs its person detector and landmarker on the whole image; the box is
the extent of its person mask (probability > 0.5) together with the landmarks it sees (visibility
> 0.5), clipped to the image. ``predict`` then enlarges it by ``--bbox-padding`` like a given box.
"""

from __future__ import annotations

import numpy as np

from benchmarks.systems.mediapipe_system import MediaPipeSystem


def box_from_pose(landmarks: np.ndarray, visibility: np.ndarray, mask: np.ndarray | None,
                  image_hw: tuple[int, int], min_visibility: float = 0.5) -> tuple[float, ...]:
    """(x1, y1, x2, y2) around the mask pixels and the visible landmarks, clipped to the image.

    Example:
        >>> lm = np.array([[10.0, 20.0], [30.0, 60.0], [500.0, 5.0]])
        >>> box_from_pose(lm, np.array([0.9, 0.8, 0.1]), None, (100, 80))
        (10.0, 20.0, 30.0, 60.0)

    Raises:
        ValueError: neither mask pixels nor visible landmarks.
    """
    h, w = image_hw
    xs, ys = [], []
    seen = np.asarray(visibility) > min_visibility
    xs += list(np.asarray(landmarks)[seen, 0])
    ys += list(np.asarray(landmarks)[seen, 1])
    if mask is not None:
        rows, cols = np.nonzero(np.asarray(mask) > 0.5)
        if rows.size:
            xs += [cols.min(), cols.max() + 1]
            ys += [rows.min(), rows.max() + 1]
    if not xs:
        raise ValueError("MediaPipe found no visible landmark and no mask pixel")
    x1, x2 = float(np.clip(min(xs), 0, w)), float(np.clip(max(xs), 0, w))
    y1, y2 = float(np.clip(min(ys), 0, h)), float(np.clip(max(ys), 0, h))
    if not (x2 > x1 and y2 > y1):
        raise ValueError(f"MediaPipe's person box is empty ({x1}, {y1}, {x2}, {y2})")
    return x1, y1, x2, y2


class MediaPipePersonBox:
    """Callable ``rgb -> (x1, y1, x2, y2)``: MediaPipe's person box of an H x W x 3 uint8 image.

    Raises (when called):
        ValueError: MediaPipe detects nobody (the message suggests ``--bbox x1,y1,x2,y2``).
    """

    source = "mediapipe"

    def __init__(self) -> None:
        self.system = MediaPipeSystem(enable_segmentation=True)

    def __call__(self, rgb: np.ndarray) -> tuple[float, float, float, float]:
        res = self.system.pose(rgb)
        if res is None:
            raise ValueError("--bbox mediapipe: MediaPipe detected no person in the image; "
                             "give the box as --bbox x1,y1,x2,y2 (or no --bbox for the whole image)")
        return box_from_pose(res.landmarks, res.visibility, res.mask, rgb.shape[:2])
