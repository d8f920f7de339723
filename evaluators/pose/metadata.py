"""Keypoint-set metadata for evaluation: names, OKS sigmas, parts, flip pairs.

A metadata JSON file holds ``{"name": str, "keypoints": [names] or [{"name": ...}], "sigmas": [K],
"parts": {"body": [ids], ...}}`` (``flip_pairs`` optional). ``keypoints308.json`` of the reference
data has this form. Built-in sets: ``keypoints308`` (Sapiens2) and ``coco17``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sapiens2.utils_io import read_json

# COCO keypoint challenge sigmas (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles).
_COCO17_SIGMAS = [
    0.26,
    0.25,
    0.25,
    0.35,
    0.35,
    0.79,
    0.79,
    0.72,
    0.72,
    0.62,
    0.62,
    1.07,
    1.07,
    0.87,
    0.87,
    0.89,
    0.89,
]
_COCO17_NAMES = [
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
]


# How a detection's area (OKS-AP area ranges) is taken when results carry no box.
DETECTION_AREA_CONVENTIONS = ("body", "part")


@dataclass
class KeypointMeta:
    """Metadata of one keypoint set.

    Attributes:
        name: set name.
        names: K keypoint names.
        sigmas: K OKS sigmas.
        parts: part name -> keypoint ids (the whole set is evaluated as ``wholebody`` in addition).
        flip_pairs: symmetric id pairs.
    """

    name: str
    names: list[str]
    sigmas: np.ndarray
    parts: dict[str, list[int]] = field(default_factory=dict)
    flip_pairs: list[tuple[int, int]] = field(default_factory=list)

    @property
    def num_keypoints(self) -> int:
        return len(self.names)

    def groups(self) -> dict[str, list[int] | None]:
        """``wholebody`` (None = all keypoints, native order) followed by every part."""
        return {"wholebody": None, **self.parts}

    def detection_area_ids(self, convention: str = "body") -> list[int] | None:
        """Keypoints whose box gives a detection's area (results without boxes).

        Args:
            convention: ``"body"`` (official whole-body convention: the box around the ``body``
                part's keypoints, one area per detection for every part and the whole body; all
                keypoints when the set defines no ``body`` part) or ``"part"`` (the box around the
                keypoints of the part being scored, as xtcocotools on a per-part file).

        Returns:
            Keypoint ids, or None for "the evaluated keypoints".
        """
        if convention not in DETECTION_AREA_CONVENTIONS:
            raise ValueError(
                f"unknown detection-area convention {convention!r}; known: {list(DETECTION_AREA_CONVENTIONS)}"
            )
        if convention == "part":
            return None
        return self.parts.get("body") or list(range(self.num_keypoints))


def meta_from_dict(d: dict[str, Any], source: str = "<metadata>") -> KeypointMeta:
    """Build and validate :class:`KeypointMeta` from a dict (see the module docstring)."""
    if not isinstance(d, dict):
        raise ValueError(f"{source}: keypoint metadata must be a JSON object")
    kps = d.get("keypoints") or d.get("names")
    if not isinstance(kps, list) or not kps:
        raise ValueError(f"{source}: needs a non-empty 'keypoints' list of names")
    names = [k["name"] if isinstance(k, dict) else str(k) for k in kps]
    sig = d.get("sigmas")
    if not isinstance(sig, list) or len(sig) != len(names):
        raise ValueError(f"{source}: 'sigmas' must list {len(names)} values (one per keypoint)")
    sigmas = np.asarray(sig, dtype=np.float64)
    if not (np.isfinite(sigmas).all() and (sigmas > 0).all()):
        raise ValueError(f"{source}: 'sigmas' must be positive and finite")
    parts = {}
    for pname, ids in (d.get("parts") or {}).items():
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(names)]
        if bad or not ids or len(set(ids)) != len(ids):
            raise ValueError(
                f"{source}: part {pname!r} needs unique ids in 0..{len(names) - 1}, got {bad or ids}"
            )
        if pname == "wholebody":
            raise ValueError(f"{source}: 'wholebody' is reserved for the whole keypoint set")
        parts[str(pname)] = ids
    pairs = [(int(a), int(b)) for a, b in d.get("flip_pairs") or []]
    return KeypointMeta(str(d.get("name") or d.get("dataset_name") or "custom"), names, sigmas, parts, pairs)


def load_meta(path_or_name: str | Path | dict | None) -> KeypointMeta:
    """Metadata from a JSON path, a dict, or a built-in name (None: ``keypoints308``)."""
    if isinstance(path_or_name, KeypointMeta):
        return path_or_name
    if path_or_name is None or path_or_name == "keypoints308":
        from sapiens2.reference import keypoints308

        return meta_from_dict(keypoints308(), "keypoints308")
    if path_or_name == "coco17":
        return meta_from_dict(
            {"name": "coco17", "keypoints": _COCO17_NAMES, "sigmas": [s / 10 for s in _COCO17_SIGMAS]},
            "coco17",
        )
    if isinstance(path_or_name, dict):
        return meta_from_dict(path_or_name)
    return meta_from_dict(read_json(path_or_name), str(path_or_name))


BUILTIN_COUNTS = {"keypoints308": 308, "coco17": 17}


def meta_for_count(num_keypoints: int, where: str = "the GT") -> KeypointMeta:
    """The one built-in metadata with ``num_keypoints`` keypoints (308 or 17).

    Args:
        num_keypoints: the GT's keypoint count.
        where: what holds that count (for messages).

    Raises:
        ValueError: no built-in set, or more than one, has that count (pass ``--meta``).
    """
    names = [n for n, k in BUILTIN_COUNTS.items() if k == num_keypoints]
    if len(names) > 1:
        raise ValueError(
            f"{where}: {num_keypoints} keypoints is ambiguous (built-in sets {names} all have it); "
            "pass --meta NAME or a metadata JSON"
        )
    if not names:
        known = ", ".join(f"{n} ({k})" for n, k in BUILTIN_COUNTS.items())
        raise ValueError(
            f"{where}: no built-in keypoint metadata has {num_keypoints} keypoints (built in: {known}); "
            "pass --meta with a metadata JSON holding names, sigmas and parts"
        )
    return load_meta(names[0])
