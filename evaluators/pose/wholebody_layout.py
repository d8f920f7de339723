"""COCO-WholeBody's distributed layout: the body in ``keypoints``, the other parts in their own fields.

``foot_kpts`` (6), ``face_kpts`` (68), ``lefthand_kpts`` (21) and ``righthand_kpts`` (21) next to the
17 body points: read together, in this order, they are the flattened 133 keypoints of the
``coco_wholebody133`` set. A record with some of the fields, or a file mixing layouts, is an error:
no part is ever dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluators.pose.coco_json import WHOLEBODY_SPLIT_FIELDS
from sapiens2.vocab import WHOLEBODY_SPLIT_SIZES

__all__ = ["WHOLEBODY_SPLIT_FIELDS", "is_wholebody_split", "merge_wholebody_fields", "split_layout"]


def is_wholebody_split(rec: Any) -> bool:
    """Whether a COCO annotation or result holds COCO-WholeBody's split fields (``foot_kpts`` ...)."""
    return isinstance(rec, dict) and any(f in rec for f in WHOLEBODY_SPLIT_FIELDS)


def merge_wholebody_fields(rec: dict, src: str, name: str):
    """The 133 keypoint triples of a split-layout record, flattened in COCO-WholeBody's order.

    ``keypoints`` (17 body points), ``foot_kpts`` (6), ``face_kpts`` (68), ``lefthand_kpts`` (21),
    ``righthand_kpts`` (21): every field must be present with its size, so that no part is ignored.
    """
    parts = []
    for field, k in WHOLEBODY_SPLIT_SIZES.items():
        if field not in rec:
            have = [f for f in WHOLEBODY_SPLIT_SIZES if f in rec]
            raise ValueError(
                f"{src}: {name}: COCO-WholeBody split layout needs all of {list(WHOLEBODY_SPLIT_SIZES)}, "
                f"has only {have}"
            )
        values = rec[field]
        n = len(values) if isinstance(values, (list, tuple, np.ndarray)) else -1
        if n != 3 * k:
            raise ValueError(
                f"{src}: {name}: {field!r} has {n} values, expected {3 * k} ({k} keypoints x 3) in the "
                "COCO-WholeBody split layout"
            )
        parts.append(np.asarray(values, dtype=np.float64) if n else np.zeros(0))
    return np.concatenate(parts)


def split_layout(recs: list, src: str, what: str) -> bool:
    """Whether the records use the WholeBody split layout (all or none: a mixture is an error)."""
    flags = [is_wholebody_split(r) for r in recs]
    if any(flags) and not all(flags):
        i = flags.index(not flags[0])
        raise ValueError(
            f"{src}: {what}[0] and {what}[{i}] disagree on the COCO-WholeBody split layout "
            f"({', '.join(WHOLEBODY_SPLIT_FIELDS)}): use one layout in a file"
        )
    return bool(flags) and flags[0]
