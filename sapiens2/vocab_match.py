"""Which built-in keypoint set a COCO-style file is in: by the names it lists, never guessed from a count.

Names are compared up to spelling (:func:`sapiens2.vocab.normalise_keypoint_name`: case, spaces,
hyphens) and the sets' declared aliases. Sets that score a file identically (same names and OKS
sigmas: COCO-17 and OCHuman-17) count as one.

Example:
    >>> keypoint_set_of_file(["Right Shoulder", "Right Elbow", "Right Wrist", "Left Shoulder", "Left Elbow",
    ...     "Left Wrist", "Right Hip", "Right Knee", "Right Ankle", "Left Hip", "Left Knee", "Left Ankle",
    ...     "Head top", "Neck"], 14)[0].name
    'aic14'
"""

from __future__ import annotations

import numpy as np

from sapiens2.vocab import _KEYPOINT_FILES, KeypointSet, VocabError, _builtin_keypoints


def _same_scoring(a: KeypointSet, b: KeypointSet) -> bool:
    """Two sets that score a file identically (same names and OKS sigmas), e.g. COCO-17 and OCHuman."""
    if a.names != b.names or (a.sigmas is None) != (b.sigmas is None):
        return False
    return a.sigmas is None or bool(np.array_equal(a.sigmas, b.sigmas))


def _one_of(sets: list[KeypointSet]) -> KeypointSet | None:
    """The first set when all of ``sets`` score identically, else None."""
    return sets[0] if sets and all(_same_scoring(sets[0], s) for s in sets[1:]) else None


def builtin_sets_with_count(num_keypoints: int) -> list[KeypointSet]:
    """The built-in keypoint sets of ``num_keypoints`` keypoints, in registry order."""
    return [ks for n in _KEYPOINT_FILES if (ks := _builtin_keypoints(n)).num_keypoints == num_keypoints]


def keypoint_set_of_file(
    names, num_keypoints: int | None, where: str = "the data"
) -> tuple[KeypointSet, str]:
    """The built-in keypoint set of a COCO-style file, from the names it lists; never guessed.

    Args:
        names: the file's ``categories[].keypoints`` names (None: it lists none).
        num_keypoints: keypoints per annotation (None: no annotation).
        where: the file (for messages).

    Returns:
        ``(set, how)``: the set and a sentence saying how it was chosen. Sets that score a file
        identically (COCO-17 and OCHuman-17: same names and sigmas) count as one, the first listed.

    Raises:
        VocabError: listed names that no built-in set has (the message lists the sets of that count
            and ``--meta``); no names and a count that several built-in sets share, or none has.
    """
    if names:
        names = [str(n) for n in names]
        found = [ks for n in _KEYPOINT_FILES if (ks := _builtin_keypoints(n)).names_match(names)]
        if num_keypoints is not None and len(names) != num_keypoints:
            raise VocabError(
                f"{where}: categories[].keypoints lists {len(names)} names, but its annotations hold "
                f"{num_keypoints} keypoints"
            )
        chosen = _one_of(found)
        if chosen is not None:
            return chosen, f"by the {len(names)} keypoint names the file lists"
        cands = [ks.name for ks in builtin_sets_with_count(len(names))]
        if found:
            raise VocabError(
                f"{where}: its keypoint names are those of several built-in sets that score differently "
                f"({[ks.name for ks in found]}); pass --meta NAME"
            )
        raise VocabError(
            f"{where}: its {len(names)} keypoint names ({', '.join(names[:4])}, ...) are no built-in "
            f"keypoint set's (built-in sets of {len(names)} keypoints: {cands or 'none'}); pass --meta NAME "
            "or a keypoint set JSON holding its names and sigmas"
        )
    if not num_keypoints:
        raise VocabError(
            f"{where}: no annotation and no keypoint names, so the keypoint set is unknown; pass --meta"
        )
    cands = builtin_sets_with_count(num_keypoints)
    chosen = _one_of(cands)
    if chosen is None:
        listed = [ks.name for ks in cands]
        raise VocabError(
            f"{where}: lists no keypoint names (categories[].keypoints) and {num_keypoints} keypoints "
            + (f"could be any of the built-in sets {listed}" if listed else "match no built-in set")
            + "; pass --meta NAME or a keypoint set JSON (names, sigmas)"
        )
    return chosen, f"the only built-in set of {num_keypoints} keypoints (the file lists no keypoint names)"


def keypoint_set_for_count(num_keypoints: int, where: str = "the data") -> KeypointSet:
    """The built-in set of ``num_keypoints`` keypoints when exactly one (up to identical scoring) has it.

    Raises:
        VocabError: no built-in set, or several that score differently, have that count.
    """
    return keypoint_set_of_file(None, num_keypoints, where)[0]
