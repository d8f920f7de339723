"""Keypoint-set metadata for evaluation: names, OKS sigmas, parts, flip pairs.

A metadata JSON file holds ``{"name": str, "keypoints": [names] or [{"name": ...}], "sigmas": [K],
"parts": {"body": [ids], ...}}`` (``flip_pairs``, ``whole_name`` optional). ``keypoints308.json`` of
the reference data has this form. The built-in sets are those of the vocabulary registry
(:mod:`sapiens2.vocab`: keypoints308, coco17, coco_wholebody133, mpii16, crowdpose14, ochuman17,
halpe136, aic14, posetrack18, humanart21; h36m17 declares no OKS sigmas and is refused here); this
module only adapts them for the evaluators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sapiens2 import vocab
from sapiens2.vocab_match import keypoint_set_of_file

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
        ks.name, list(ks.names), ks.require_sigmas().copy(), {k: list(v) for k, v in ks.parts.items()},
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


def meta_of_file(names, num_keypoints: int | None, where: str = "the GT") -> tuple[KeypointMeta, str]:
    """The built-in metadata of a COCO-style file, from its listed keypoint names (never by count alone).

    See :func:`sapiens2.vocab_match.keypoint_set_of_file`; returns ``(meta, how it was chosen)``.

    Raises:
        ValueError: unknown names, a count several built-in sets share, a set without OKS sigmas.
    """
    ks, how = keypoint_set_of_file(names, num_keypoints, where)
    return _from_set(ks), how


def meta_for_count(num_keypoints: int, where: str = "the GT") -> KeypointMeta:
    """The one built-in metadata with ``num_keypoints`` keypoints (for files that list no names).

    Raises:
        ValueError: no built-in set, or several that score differently, have that count (pass ``--meta``).
    """
    return meta_of_file(None, num_keypoints, where)[0]
