"""MediaPipe's pose landmarks on a split's keypoint set: which ones are shared, and how they are scored.

:data:`LANDMARK_MAP` names each usable BlazePose landmark by its ``keypoints308`` keypoint. A split
of another keypoint set (COCO-17, MPII-16, OCHuman-17, COCO-WholeBody-133, ...) is scored on the
landmarks whose keypoint that set has too, with that set's own OKS sigmas and flip pairs:

- by name: the set's keypoint of the same name (compared as :func:`sapiens2.vocab.normalise_keypoint_name`
  spells names; the built-in sets use the ``keypoints308`` spelling for the points they share);
- else by a rule of :func:`sapiens2.vocab_mapping.keypoint_mapping` (``{side}_{finger}1`` of
  COCO-WholeBody and Halpe is the knuckle, ``keypoints308``'s ``{side}_{finger}_third_joint``),
  only where exactly one keypoint of the set follows a rule to that point.

Nothing else is guessed: a landmark without such a keypoint is left out of the subset (MPII's
``head_top`` or ``upper_neck`` are no MediaPipe landmark), and a set that shares none is an error.

Example:
    >>> sub = shared_subset("coco17")
    >>> len(sub.names), sub.protocol_id, sub.names[9]
    (17, 'shared17-coco17-gtbox-v1', 'left_wrist')
    >>> shared_subset("keypoints308").protocol_id
    'shared27-gtbox-v1'
"""

from __future__ import annotations

from dataclasses import dataclass

from sapiens2.vocab import KeypointSet, VocabError, keypoint_set, normalise_keypoint_name
from sapiens2.vocab_mapping import keypoint_mapping

KEYPOINTS308 = "keypoints308"
# The protocol of the 27-keypoint subset on keypoints308 splits; other sets name theirs by size and set.
KEYPOINTS308_PROTOCOL_ID = "shared27-gtbox-v1"

# (MediaPipe landmark index, MediaPipe PoseLandmark name, keypoints308 name, our part).
# Left/right are the subject's in both vocabularies. Hands: BlazePose's pinky/index landmarks
# are the first knuckles (MCP joints), i.e. our "*_third_joint" (counted from the fingertip).
LANDMARK_MAP: tuple[tuple[int, str, str, str], ...] = (
    (0, "NOSE", "nose", "body"),
    (2, "LEFT_EYE", "left_eye", "body"),
    (5, "RIGHT_EYE", "right_eye", "body"),
    (7, "LEFT_EAR", "left_ear", "body"),
    (8, "RIGHT_EAR", "right_ear", "body"),
    (11, "LEFT_SHOULDER", "left_shoulder", "body"),
    (12, "RIGHT_SHOULDER", "right_shoulder", "body"),
    (13, "LEFT_ELBOW", "left_elbow", "body"),
    (14, "RIGHT_ELBOW", "right_elbow", "body"),
    (15, "LEFT_WRIST", "left_wrist", "body"),
    (16, "RIGHT_WRIST", "right_wrist", "body"),
    (23, "LEFT_HIP", "left_hip", "body"),
    (24, "RIGHT_HIP", "right_hip", "body"),
    (25, "LEFT_KNEE", "left_knee", "body"),
    (26, "RIGHT_KNEE", "right_knee", "body"),
    (27, "LEFT_ANKLE", "left_ankle", "body"),
    (28, "RIGHT_ANKLE", "right_ankle", "body"),
    (29, "LEFT_HEEL", "left_heel", "foot"),
    (30, "RIGHT_HEEL", "right_heel", "foot"),
    (31, "LEFT_FOOT_INDEX", "left_big_toe", "foot"),
    (32, "RIGHT_FOOT_INDEX", "right_big_toe", "foot"),
    (9, "MOUTH_LEFT", "l_outer_corner_of_mouth", "face"),
    (10, "MOUTH_RIGHT", "r_outer_corner_of_mouth", "face"),
    (17, "LEFT_PINKY", "left_pinky_finger_third_joint", "left_hand"),
    (19, "LEFT_INDEX", "left_forefinger_third_joint", "left_hand"),
    (18, "RIGHT_PINKY", "right_pinky_finger_third_joint", "right_hand"),
    (20, "RIGHT_INDEX", "right_forefinger_third_joint", "right_hand"),
)
# MediaPipe landmarks with no unambiguous counterpart in keypoints308, and why.
LEFT_OUT: dict[str, str] = {
    "LEFT_EYE_INNER": "our eye corners come as both lash-line and eyelid-line ends; no single point",
    "LEFT_EYE_OUTER": "our eye corners come as both lash-line and eyelid-line ends; no single point",
    "RIGHT_EYE_INNER": "our eye corners come as both lash-line and eyelid-line ends; no single point",
    "RIGHT_EYE_OUTER": "our eye corners come as both lash-line and eyelid-line ends; no single point",
    "LEFT_THUMB": "BlazePose's 'thumb #2 knuckle' may be the MCP or the IP joint (thumb2 or thumb3)",
    "RIGHT_THUMB": "BlazePose's 'thumb #2 knuckle' may be the MCP or the IP joint (thumb2 or thumb3)",
}


class NoSharedKeypoints(ValueError):
    """A keypoint set that has none of MediaPipe's mapped landmarks."""


@dataclass(frozen=True)
class SharedSubset:
    """The landmarks of :data:`LANDMARK_MAP` that one keypoint set has, in :data:`LANDMARK_MAP` order.

    Attributes:
        keypoint_set: the split's keypoint set.
        rows: the :data:`LANDMARK_MAP` rows kept.
        set_ids: each kept row's keypoint id in ``keypoint_set``.
        rules: how each was matched (``same name`` or the :mod:`sapiens2.vocab_mapping` rule).
    """

    keypoint_set: KeypointSet
    rows: tuple[tuple[int, str, str, str], ...]
    set_ids: tuple[int, ...]
    rules: tuple[str, ...]

    @property
    def landmark_ids(self) -> list[int]:
        """MediaPipe landmark indices, in subset order."""
        return [row[0] for row in self.rows]

    @property
    def names(self) -> list[str]:
        """The keypoint set's names of the subset, in subset order."""
        return [self.keypoint_set.names[i] for i in self.set_ids]

    @property
    def protocol_id(self) -> str:
        """``shared27-gtbox-v1`` on keypoints308, else ``shared{K}-{set}-gtbox-v1``: one leaderboard
        table per subset, so subsets of different sets or sizes are never ranked together."""
        if self.keypoint_set.name == KEYPOINTS308:
            return KEYPOINTS308_PROTOCOL_ID
        return f"shared{len(self.rows)}-{self.keypoint_set.name}-gtbox-v1"

    def landmark_names(self) -> dict[str, str]:
        """MediaPipe landmark name -> the keypoint set's name, for the records."""
        return {row[1]: name for row, name in zip(self.rows, self.names)}

    def meta(self) -> dict:
        """Keypoint metadata for ``PoseEvaluator``: names, the set's sigmas, parts, flip pairs.

        Parts are :data:`LANDMARK_MAP`'s (only those with a kept landmark); flip pairs are the
        set's own, both directions, in subset order.

        Raises:
            VocabError: the set declares no OKS sigmas (e.g. Human3.6M).
        """
        ks = self.keypoint_set
        if ks.sigmas is None:
            why = f" ({ks.note})" if ks.note else ""
            raise VocabError(f"keypoint set {ks.name} declares no OKS sigmas{why}: MediaPipe's pose AP on "
                             "its shared keypoints is undefined")
        sigmas = ks.sigmas
        parts: dict[str, list[int]] = {}
        for j, row in enumerate(self.rows):
            parts.setdefault(row[3], []).append(j)
        partner = {a: b for a, b in ks.flip_pairs} | {b: a for a, b in ks.flip_pairs}
        pos = {sid: j for j, sid in enumerate(self.set_ids)}
        flips = [(j, pos[partner[sid]]) for j, sid in enumerate(self.set_ids) if partner.get(sid) in pos]
        return {
            "name": f"{ks.name}-shared-mediapipe{len(self.rows)}",
            "keypoints": self.names,
            "sigmas": [float(sigmas[i]) for i in self.set_ids],
            "parts": parts,
            "flip_pairs": flips,
        }


def _rule_matches(ks: KeypointSet) -> dict[str, list[tuple[int, str]]]:
    """keypoints308 name -> the set's keypoints that a declared rule (not a name) maps onto it."""
    ref = keypoint_set(KEYPOINTS308)
    mapping = keypoint_mapping(ref, ks)
    out: dict[str, list[tuple[int, str]]] = {}
    for j, (src, rule) in enumerate(zip(mapping.source_ids, mapping.rules)):
        if src >= 0 and rule != "same name":
            out.setdefault(ref.names[int(src)], []).append((j, rule))
    return out


def shared_subset(spec=KEYPOINTS308, where: str = "") -> SharedSubset:
    """The landmarks of :data:`LANDMARK_MAP` that keypoint set ``spec`` has (see the module docstring).

    Args:
        spec: a keypoint set (name, JSON path, dict or :class:`~sapiens2.vocab.KeypointSet`).
        where: what the set belongs to (a split folder), for the error message.

    Raises:
        NoSharedKeypoints: the set has none of the landmarks.
    """
    ks = keypoint_set(spec)
    by_name = {normalise_keypoint_name(n): i for i, n in enumerate(ks.names)}
    by_rule = _rule_matches(ks)
    rows, ids, rules = [], [], []
    for row in LANDMARK_MAP:
        ours = row[2]
        if normalise_keypoint_name(ours) in by_name:
            rows.append(row)
            ids.append(by_name[normalise_keypoint_name(ours)])
            rules.append("same name")
        elif len(by_rule.get(ours, ())) == 1:  # two keypoints following rules to one point: ambiguous
            rows.append(row)
            ids.append(by_rule[ours][0][0])
            rules.append(by_rule[ours][0][1])
    if not rows:
        owner = f"{where}: " if where else ""
        raise NoSharedKeypoints(
            f"{owner}keypoint set {ks.name} ({ks.num_keypoints} keypoints) shares no keypoint with "
            f"MediaPipe's landmarks (by keypoints308 name: {', '.join(r[2] for r in LANDMARK_MAP)}); "
            "its pose cannot be scored against MediaPipe"
        )
    return SharedSubset(ks, tuple(rows), tuple(ids), tuple(rules))
