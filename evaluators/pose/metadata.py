"""Keypoint-set metadata for evaluation: names, OKS sigmas, parts, flip pairs.

A metadata JSON file holds ``{"name": str, "keypoints": [names] or [{"name": ...}], "sigmas": [K],
"parts": {"body": [ids], ...}}`` (``flip_pairs``, ``whole_name`` optional). ``keypoints308.json`` of
the reference data has this form. The built-in sets are those of the vocabulary registry
(:mod:`sapiens2.vocab`: keypoints308, coco17, coco_wholebody133, mpii16, crowdpose14, ochuman17,
halpe136); this module only adapts them for the evaluators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sapiens2 import vocab

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
        whole_name: how reports label the whole set (``wholebody``, or ``body`` for body-only sets
            such as COCO-17); the evaluators' internal group key stays ``wholebody``.
    """

    name: str
    names: list[str]
    sigmas: np.ndarray
    parts: dict[str, list[int]] = field(default_factory=dict)
    flip_pairs: list[tuple[int, int]] = field(default_factory=list)
    whole_name: str = "wholebody"

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


def _from_set(ks: vocab.KeypointSet) -> KeypointMeta:
    return KeypointMeta(
        ks.name, list(ks.names), ks.sigmas.copy(), {k: list(v) for k, v in ks.parts.items()},
        list(ks.flip_pairs), ks.whole_name,
    )


def meta_from_dict(d: dict[str, Any], source: str = "<metadata>") -> KeypointMeta:
    """Build and validate :class:`KeypointMeta` from a dict (see the module docstring)."""
    return _from_set(vocab.keypoint_set_from_dict(d, source))


def load_meta(path_or_name: str | Path | dict | None) -> KeypointMeta:
    """Metadata from a JSON path, a dict, or a built-in name or alias (None: ``keypoints308``)."""
    if isinstance(path_or_name, KeypointMeta):
        return path_or_name
    return _from_set(vocab.keypoint_set(path_or_name))


# the set chosen for a GT's keypoint count when none is named (one per count)
BUILTIN_COUNTS = {name: k for k, name in vocab.DEFAULT_FOR_COUNT.items()}


def meta_for_count(num_keypoints: int, where: str = "the GT") -> KeypointMeta:
    """The one built-in metadata chosen for ``num_keypoints`` keypoints (``BUILTIN_COUNTS``).

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
