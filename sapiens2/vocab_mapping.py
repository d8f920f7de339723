"""Declared maps between vocabularies: keypoints by name, labels by a many-to-one table.

Keypoints (e.g. Sapiens2's 308 -> COCO-17 or COCO-WholeBody-133): a target keypoint takes the
source keypoint of the same name; two rules by meaning cover the hand points that the two
vocabularies name differently; every other target keypoint is *unmapped* (no prediction:
coordinates 0, score 0, so it is never a hit). From the 308 set:

* COCO-17: all 17 by name; COCO-WholeBody: body 17 and feet 6 by name; hands: ``{side}_hand_root``
  = ``{side}_wrist`` (WholeBody's hand root is the wrist joint), ``{side}_{finger}1`` =
  ``{side}_{finger}_third_joint`` (the knuckle, the 308 set's 4th point of each finger), and
  ``{finger}2..4`` by name: 42 hand points. The 68 iBUG face points (``face-0`` .. ``face-67``)
  have no 308 counterpart (the 308 face landmarks follow other definitions), so they stay unmapped:
  face AP of a mapped model is not a face score, and the whole-body AP counts them as misses.

Labels (e.g. Sapiens2's 29 -> person/background or Pascal-Person-Part): the target label set's
JSON declares ``"from": {"sapiens2_29": {"map": {source: target}, "unmapped": {source: why}}}``.
A many-to-one map exists only where every source class lies inside one target class: LIP, CIHP and
ATR split clothing in ways the 29 classes do not (coat, dress, jumpsuit vs one upper clothing), so
no map into them is declared. Pixels of an unmapped class are an error unless the caller picks a
policy (``"ignore"``, or a target class name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from sapiens2.vocab import KeypointSet, LabelSet, VocabError, keypoint_set, label_set

_FINGERS = ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger")


@dataclass(frozen=True)
class KeypointMapping:
    """``source_ids[j]``: the source keypoint that gives target keypoint ``j`` (-1: unmapped)."""

    source: str
    target: str
    source_ids: np.ndarray
    rules: tuple[str, ...]

    @property
    def mapped(self) -> np.ndarray:
        """Bool mask of the target keypoints that have a source keypoint."""
        return self.source_ids >= 0

    def unmapped_names(self, target: KeypointSet) -> list[str]:
        """Names of the target keypoints without a source keypoint."""
        return [target.names[j] for j in np.nonzero(~self.mapped)[0]]


def _by_meaning(name: str) -> list[tuple[str, str]]:
    """Source names a target name may take besides its own, with the rule's wording."""
    m = re.fullmatch(r"(left|right)_hand_root", name)
    if m:
        return [(f"{m.group(1)}_wrist", "hand root = wrist")]
    m = re.fullmatch(rf"(left|right)_({'|'.join(_FINGERS)})1", name)
    if m:
        return [(f"{m.group(1)}_{m.group(2)}_third_joint", "finger1 (knuckle) = finger_third_joint")]
    return []


def keypoint_mapping(source, target) -> KeypointMapping:
    """The declared map from keypoint set ``source`` to ``target`` (see the module docstring)."""
    src, dst = keypoint_set(source), keypoint_set(target)
    index = {n: i for i, n in enumerate(src.names)}
    ids, rules = [], []
    for name in dst.names:
        if name in index:
            ids.append(index[name])
            rules.append("same name")
            continue
        alt = [(index[s], why) for s, why in _by_meaning(name) if s in index]
        ids.append(alt[0][0] if alt else -1)
        rules.append(alt[0][1] if alt else "unmapped")
    return KeypointMapping(src.name, dst.name, np.asarray(ids, dtype=np.int64), tuple(rules))


def map_keypoints(xy, scores, mapping: KeypointMapping) -> tuple[np.ndarray, np.ndarray]:
    """Predictions ``N x Ks x 2`` and ``N x Ks`` scores of the source set as target-set arrays.

    Unmapped target keypoints get coordinates 0 and score 0.
    """
    xy, scores = np.asarray(xy, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    need = int(mapping.source_ids.max()) + 1 if mapping.mapped.any() else 0
    if xy.ndim != 3 or xy.shape[-1] != 2 or scores.shape != xy.shape[:2] or xy.shape[1] < need:
        raise VocabError(
            f"map_keypoints {mapping.source} -> {mapping.target}: expected N x K x 2 keypoints and N x K "
            f"scores of the source set, got {xy.shape} and {scores.shape}"
        )
    n, k = xy.shape[0], mapping.source_ids.shape[0]
    out_xy, out_s = np.zeros((n, k, 2)), np.zeros((n, k))
    m = mapping.mapped
    out_xy[:, m] = xy[:, mapping.source_ids[m]]
    out_s[:, m] = scores[:, mapping.source_ids[m]]
    return out_xy, out_s


@dataclass(frozen=True)
class LabelMapping:
    """``lut[s]``: the target class of source class ``s`` (-1: unmapped, see ``unmapped``)."""

    source: str
    target: str
    lut: np.ndarray
    unmapped: dict[str, str]


def label_mapping(source, target) -> LabelMapping:
    """The many-to-one map the target label set declares from ``source``.

    Raises:
        VocabError: the target declares no map from the source set.
    """
    src, dst = label_set(source), label_set(target)
    decl = dst.maps_from.get(src.name)
    if decl is None:
        have = sorted(dst.maps_from) or "none"
        raise VocabError(
            f"label set {dst.name} declares no many-to-one map from {src.name} (declared from: {have}); "
            "score in the source's own classes or provide a label set JSON with a 'from' table"
        )
    lut = np.full(src.num_classes, -1, dtype=np.int64)
    for s_name, t_name in decl.get("map", {}).items():
        if s_name not in src.names or t_name not in dst.names:
            raise VocabError(
                f"label set {dst.name}: map entry {s_name!r} -> {t_name!r} names an unknown class"
            )
        lut[src.names.index(s_name)] = dst.names.index(t_name)
    missing = [src.names[i] for i in np.nonzero(lut < 0)[0] if src.names[i] not in decl.get("unmapped", {})]
    if missing:
        raise VocabError(f"label set {dst.name}: map from {src.name} says nothing of {missing}")
    return LabelMapping(src.name, dst.name, lut, dict(decl.get("unmapped", {})))


def remap_labels(labels, mapping: LabelMapping, unmapped: str | None = None, target: LabelSet | None = None):
    """A source-class label map (H x W ints) in the target's classes.

    Args:
        labels: integer array of source class ids (the source's ignore index passes through as the
            target's).
        mapping: from :func:`label_mapping`.
        unmapped: policy for pixels of an unmapped source class: None = error, ``"ignore"`` = the
            target's ignore index, or a target class name.
        target: the target label set (default: looked up by name).

    Raises:
        VocabError: a value outside the source classes, or unmapped pixels without a policy.
    """
    dst = target or label_set(mapping.target)
    arr = np.asarray(labels)
    src_ignore = label_set(mapping.source).ignore_index
    ign = arr == src_ignore
    bad = (~ign) & ((arr < 0) | (arr >= mapping.lut.shape[0]))
    if bad.any():
        raise VocabError(
            f"remap {mapping.source} -> {mapping.target}: value {int(arr[bad][0])} is not a source class"
        )
    out = np.where(ign, dst.ignore_index, mapping.lut[np.where(ign, 0, arr)])
    if (out < 0).any():
        if unmapped is None:
            classes = sorted({label_set(mapping.source).names[v] for v in np.unique(arr[out < 0])})
            raise VocabError(
                f"remap {mapping.source} -> {mapping.target}: pixels of {classes} have no target class "
                f"({'; '.join(mapping.unmapped[c] for c in classes)}); choose unmapped='ignore' or a class"
            )
        fill = dst.ignore_index if unmapped == "ignore" else dst.names.index(unmapped)
        out = np.where(out < 0, fill, out)
    return out.astype(np.int64)
