"""Keypoint sets and label sets: the one registry of the vocabularies (data in ``sapiens2/data``).

A keypoint set is K names with OKS sigmas, parts (name -> ids), flip pairs, skeleton links and a
label for the whole set (``"wholebody"`` for the whole-body sets, ``"body"`` for body-only ones).
A label set is C class names with an ignore index, a palette and, where one exists, a declared
many-to-one map from another label set. Built in (``keypoint_sets()``, ``label_sets()``):

* keypoints: ``keypoints308`` (Sapiens2), ``coco17``, ``coco_wholebody133``, ``mpii16``,
  ``crowdpose14``, ``ochuman17``, ``halpe136``, ``aic14`` (AI Challenger), ``h36m17`` (Human3.6M: no
  OKS sigmas), ``posetrack18``, ``humanart21`` (Human-Art's 21; its 17 are COCO-17's names and sigmas);
* labels: ``sapiens2_29``, ``person2``, ``lip20``, ``cihp20``, ``atr18``, ``pascal_person_part7``.

Anything else is a user JSON file (same format as the shipped files; see ``sapiens2/datasets/README.md``)
or, for label sets, a list of class names.

Example:
    >>> keypoint_set("coco").num_keypoints, keypoint_set("coco17").whole_name
    (17, 'body')
    >>> label_set("lip").names[13], label_set(["bg", "person"]).num_classes
    ('Face', 2)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from sapiens2.reference import DATA_DIR

VOCAB_DIR = DATA_DIR / "vocab"
_KEYPOINT_FILES = {
    "keypoints308": DATA_DIR / "keypoints308.json",
    **{
        n: VOCAB_DIR / f"{n}.json"
        for n in (
            "coco17", "coco_wholebody133", "mpii16", "crowdpose14", "ochuman17", "halpe136",
            "aic14", "h36m17", "posetrack18", "humanart21",
        )
    },  # fmt: skip
}
_LABEL_FILES = {
    "sapiens2_29": DATA_DIR / "seg_classes29.json",
    **{n: VOCAB_DIR / f"{n}.json" for n in ("person2", "lip20", "cihp20", "atr18", "pascal_person_part7")},
}
KEYPOINT_ALIASES = {
    "goliath": "keypoints308",
    "sapiens308": "keypoints308",
    "coco": "coco17",
    "coco_wholebody": "coco_wholebody133",
    "wholebody133": "coco_wholebody133",
    "mpii": "mpii16",
    "crowdpose": "crowdpose14",
    "ochuman": "ochuman17",
    "halpe": "halpe136",
    "aic": "aic14",
    "ai_challenger": "aic14",
    "h36m": "h36m17",
    "human36m": "h36m17",
    "human3.6m": "h36m17",
    "posetrack": "posetrack18",
    "posetrack18_17": "posetrack18",
    # Human-Art's 17-point annotations are COCO-17 (mmpose's humanart.py: COCO's names and sigmas)
    "humanart": "coco17",
    "humanart17": "coco17",
}
LABEL_ALIASES = {
    "sapiens2": "sapiens2_29",
    "seg29": "sapiens2_29",
    "person": "person2",
    "lip": "lip20",
    "cihp": "cihp20",
    "atr": "atr18",
    "pascal_person_part": "pascal_person_part7",
    "ppp7": "pascal_person_part7",
}


# COCO-WholeBody's distributed layout: field -> keypoints, in the order of the flattened 133 set
WHOLEBODY_SPLIT_SIZES = {
    "keypoints": 17, "foot_kpts": 6, "face_kpts": 68, "lefthand_kpts": 21, "righthand_kpts": 21,
}  # fmt: skip


class VocabError(ValueError):
    """A vocabulary that is unknown, malformed, or does not fit the data it is used with."""


@dataclass(frozen=True, eq=False)
class KeypointSet:
    """One keypoint vocabulary.

    Attributes:
        name: registry name (``coco17``) or the user file's ``dataset_name``.
        names: K keypoint names.
        sigmas: K OKS sigmas, or None for a set that declares none (Human3.6M: no OKS AP).
        parts: part name -> keypoint ids (never ``wholebody``).
        flip_pairs: (i, j) pairs of left/right partners.
        skeleton: (i, j) links.
        whole_name: label of the whole set in reports (``wholebody`` or ``body``).
        source: where the facts come from.
    """

    name: str
    names: tuple[str, ...]
    sigmas: np.ndarray | None = field(repr=False)
    parts: dict[str, list[int]] = field(default_factory=dict, repr=False)
    flip_pairs: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    skeleton: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    whole_name: str = "wholebody"
    source: str = ""
    aliases: dict[str, list[str]] = field(default_factory=dict, repr=False)
    note: str = field(default="", repr=False)

    @property
    def num_keypoints(self) -> int:
        return len(self.names)

    def require_sigmas(self, what: str = "COCO OKS AP") -> np.ndarray:
        """The OKS sigmas; a set that declares none (Human3.6M) raises, naming the set and why."""
        if self.sigmas is None:
            why = f" ({self.note})" if self.note else ""
            raise VocabError(
                f"keypoint set {self.name} declares no OKS sigmas{why}: {what} is undefined for it; "
                "pass --meta with a keypoint set JSON that holds sigmas to score it anyway"
            )
        return self.sigmas

    def names_match(self, names) -> bool:
        """Whether ``names`` are this set's, in order, up to spelling (case, spaces, hyphens) and aliases."""
        names = [str(n) for n in names]
        return len(names) == self.num_keypoints and not self._name_mismatches(names)

    def _name_mismatches(self, names: list[str]) -> list[tuple[int, str, str]]:
        return [
            (i, got, want)
            for i, (got, want) in enumerate(zip(names, self.names))
            if got != want
            and normalise_keypoint_name(got)
            not in {normalise_keypoint_name(a) for a in (want, *self.aliases.get(want, ()))}
        ]

    def check_names(self, names, where: str) -> None:
        """Raise unless ``names`` (e.g. a COCO category's list) are this set's, in order.

        Spellings are compared after :func:`normalise_keypoint_name` (``"Right Shoulder"`` and
        ``"Right-shoulder"`` are ``right_shoulder``); the set's declared aliases are accepted too.
        """
        names = [str(n) for n in names]
        if len(names) != self.num_keypoints:
            raise VocabError(
                f"{where}: lists {len(names)} keypoint names, but keypoint set {self.name} has "
                f"{self.num_keypoints}"
            )
        bad = self._name_mismatches(names)
        if bad:
            shown = ", ".join(f"{i}: {g!r} (expected {w!r})" for i, g, w in bad[:5])
            raise VocabError(f"{where}: keypoint names differ from keypoint set {self.name}: {shown}")

    def index(self, name: str) -> int:
        """Id of keypoint ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise VocabError(f"keypoint set {self.name}: no keypoint named {name!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as the shipped files), e.g. for an mmpose ``dataset_meta``."""
        return {
            "dataset_name": self.name,
            "whole_name": self.whole_name,
            "num_keypoints": self.num_keypoints,
            "keypoints": list(self.names),
            "sigmas": None if self.sigmas is None else self.sigmas.tolist(),
            "parts": self.parts,
            "flip_pairs": [list(p) for p in self.flip_pairs],
            "skeleton": [list(p) for p in self.skeleton],
            "aliases": self.aliases,
        }


@dataclass(frozen=True)
class LabelSet:
    """One label vocabulary: class ``i`` is ``names[i]``; ``ignore_index`` pixels are not scored."""

    name: str
    names: tuple[str, ...]
    ignore_index: int = 255
    palette: tuple[tuple[int, int, int], ...] = field(default=(), repr=False)
    maps_from: dict[str, dict] = field(default_factory=dict, repr=False)
    source: str = ""

    @property
    def num_classes(self) -> int:
        return len(self.names)


def _read(path: Path, what: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise VocabError(f"{path}: no such {what} file") from None
    except (OSError, ValueError) as e:
        raise VocabError(f"{path}: cannot read {what} JSON ({e})") from None
    if not isinstance(data, dict):
        raise VocabError(f"{path}: a {what} file must hold a JSON object")
    return data


def _pairs(values, k: int, what: str, source: str) -> tuple[tuple[int, int], ...]:
    out = []
    for v in values or []:
        link = v.get("link") if isinstance(v, dict) else v
        if (
            not isinstance(link, (list, tuple))
            or len(link) != 2
            or not all(isinstance(i, int) and 0 <= i < k for i in link)
        ):
            raise VocabError(f"{source}: {what} entry {v!r} must be two keypoint ids in 0..{k - 1}")
        out.append((int(link[0]), int(link[1])))
    return tuple(out)


def keypoint_set_from_dict(d: dict, source: str = "<keypoint set>") -> KeypointSet:
    """Build and validate a :class:`KeypointSet` from its JSON form.

    Keys: ``keypoints`` (names, or ``{"name": ...}`` objects; ``names`` is accepted too), ``sigmas``
    (K positive values), optional ``dataset_name``/``name``, ``parts``, ``flip_pairs``, ``skeleton``
    (pairs or ``{"link": [i, j]}``), ``whole_name``, ``num_keypoints`` (checked), ``source``.
    """
    if not isinstance(d, dict):
        raise VocabError(f"{source}: a keypoint set must be a JSON object")
    kps = d.get("keypoints") or d.get("names")
    if not isinstance(kps, list) or not kps:
        raise VocabError(f"{source}: needs a non-empty 'keypoints' list of names")
    names = tuple(str(k["name"]) if isinstance(k, dict) else str(k) for k in kps)
    if len(set(names)) != len(names):
        raise VocabError(f"{source}: keypoint names must be unique")
    if "num_keypoints" in d and int(d["num_keypoints"]) != len(names):
        raise VocabError(f"{source}: num_keypoints is {d['num_keypoints']} but {len(names)} names are listed")
    sig = d.get("sigmas")
    sigmas = None
    if sig is not None or "sigmas" not in d:  # an explicit null: the set declares no OKS sigmas
        if not isinstance(sig, list) or len(sig) != len(names):
            raise VocabError(f"{source}: 'sigmas' must list {len(names)} values (one per keypoint)")
        sigmas = np.asarray(sig, dtype=np.float64)
        if not (np.isfinite(sigmas).all() and (sigmas > 0).all()):
            raise VocabError(f"{source}: 'sigmas' must be positive and finite")
    whole = str(d.get("whole_name") or "wholebody")
    parts: dict[str, list[int]] = {}
    for pname, ids in (d.get("parts") or {}).items():
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < len(names)]
        if bad or not ids or len(set(ids)) != len(ids):
            raise VocabError(
                f"{source}: part {pname!r} needs unique ids in 0..{len(names) - 1}, got {bad or ids}"
            )
        if pname in ("wholebody", whole):
            raise VocabError(f"{source}: part name {pname!r} is reserved for the whole keypoint set")
        parts[str(pname)] = ids
    return KeypointSet(
        name=str(d.get("dataset_name") or d.get("name") or "custom"),
        names=names,
        sigmas=sigmas,
        parts=parts,
        flip_pairs=_pairs(d.get("flip_pairs"), len(names), "flip_pairs", source),
        skeleton=_pairs(d.get("skeleton"), len(names), "skeleton", source),
        whole_name=whole,
        source=str(d.get("source", source)),
        aliases={str(k): [str(a) for a in v] for k, v in (d.get("aliases") or {}).items()},
        note=str(d.get("note") or ""),
    )


def label_set_from_dict(d: dict, source: str = "<label set>") -> LabelSet:
    """Build and validate a :class:`LabelSet` from ``{"classes": [names or {"id", "name", "color"}]}``."""
    if not isinstance(d, dict) or not isinstance(d.get("classes"), list) or not d["classes"]:
        raise VocabError(f"{source}: a label set needs a non-empty 'classes' list")
    classes = d["classes"]
    names = tuple(str(c["name"]) if isinstance(c, dict) else str(c) for c in classes)
    ids = [c.get("id", i) if isinstance(c, dict) else i for i, c in enumerate(classes)]
    if ids != list(range(len(names))):
        raise VocabError(f"{source}: class ids must be 0..{len(names) - 1} in order, got {ids}")
    if len(set(names)) != len(names):
        raise VocabError(f"{source}: class names must be unique")
    if "num_classes" in d and int(d["num_classes"]) != len(names):
        raise VocabError(f"{source}: num_classes is {d['num_classes']} but {len(names)} classes are listed")
    ignore = int(d.get("ignore_index", 255))
    if 0 <= ignore < len(names):
        raise VocabError(f"{source}: ignore_index {ignore} is a class id (0..{len(names) - 1})")
    colours = [c.get("color") if isinstance(c, dict) else None for c in classes]
    palette = tuple(tuple(int(v) for v in c) for c in colours) if all(colours) else ()
    return LabelSet(
        str(d.get("name") or "custom"),
        names,
        ignore,
        palette,
        dict(d.get("from") or {}),
        str(d.get("source", source)),
    )


def _resolve(name: str, files: dict, aliases: dict) -> str | None:
    key = str(name).lower().replace("-", "_")
    key = aliases.get(key, key)
    return key if key in files else None


@cache
def _builtin_keypoints(name: str) -> KeypointSet:
    data = _read(_KEYPOINT_FILES[name], "keypoint set")
    data = {**data, "dataset_name": name}
    if name == "keypoints308":
        data["whole_name"] = "wholebody"
    return keypoint_set_from_dict(data, str(_KEYPOINT_FILES[name]))


@cache
def _builtin_labels(name: str) -> LabelSet:
    return label_set_from_dict(
        {**_read(_LABEL_FILES[name], "label set"), "name": name}, str(_LABEL_FILES[name])
    )


def keypoint_sets() -> list[str]:
    """Names of the built-in keypoint sets."""
    return list(_KEYPOINT_FILES)


def label_sets() -> list[str]:
    """Names of the built-in label sets."""
    return list(_LABEL_FILES)


def keypoint_set(spec) -> KeypointSet:
    """A keypoint set from a built-in name (or alias), a JSON file path, a dict, or a KeypointSet."""
    if isinstance(spec, KeypointSet):
        return spec
    if isinstance(spec, dict):
        return keypoint_set_from_dict(spec)
    if spec is None:
        spec = "keypoints308"
    name = _resolve(str(spec), _KEYPOINT_FILES, KEYPOINT_ALIASES)
    if name is not None:
        return _builtin_keypoints(name)
    path = Path(spec)
    if path.suffix.lower() != ".json" and not path.exists():
        raise VocabError(f"unknown keypoint set {spec!r}; built in: {keypoint_sets()} (or a JSON file)")
    return keypoint_set_from_dict(_read(path, "keypoint set"), str(path))


def label_set(spec) -> LabelSet:
    """A label set from a built-in name or alias, a JSON path, a dict, a list of class names, a LabelSet."""
    if isinstance(spec, LabelSet):
        return spec
    if isinstance(spec, (list, tuple)):
        return label_set_from_dict({"name": "custom", "classes": list(spec)})
    if isinstance(spec, dict):
        return label_set_from_dict(spec)
    if spec is None:
        spec = "sapiens2_29"
    name = _resolve(str(spec), _LABEL_FILES, LABEL_ALIASES)
    if name is not None:
        return _builtin_labels(name)
    path = Path(spec)
    if path.suffix.lower() != ".json" and not path.exists():
        raise VocabError(f"unknown label set {spec!r}; built in: {label_sets()} (or a JSON file)")
    return label_set_from_dict(_read(path, "label set"), str(path))


def normalise_keypoint_name(name: str) -> str:
    """A keypoint name as the built-in sets spell it: lower case, spaces and hyphens as ``_``.

    Example:
        >>> normalise_keypoint_name("Right Shoulder"), normalise_keypoint_name("Upper-neck")
        ('right_shoulder', 'upper_neck')
    """
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())
