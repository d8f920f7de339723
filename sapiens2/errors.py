"""Error types shared by every layer.

``BenchError`` is the base of every expected failure (bad input, a missing file, an unknown name):
the CLI turns it into one message and a non-zero exit (``--debug`` shows the traceback).
``UnknownNameError`` is raised wherever a name is looked up (archs, tasks, registries, presets)
and always lists the known names, after the close ones ("did you mean") when there are any.

Example:
    >>> from sapiens2.errors import UnknownNameError
    >>> raise UnknownNameError("task", "depth", ["pose", "seg"])
    Traceback (most recent call last):
    ...
    sapiens2.errors.UnknownNameError: unknown task 'depth'; known: pose, seg
    >>> print(UnknownNameError("backbone", "dinov2-small", ["dinov2_small", "dinov2_base", "pixels"]))
    unknown backbone 'dinov2-small'; did you mean 'dinov2_small'? known: dinov2_small, dinov2_base, pixels
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def _folded(name: str) -> str:
    return re.sub(r"[-_.\s]+", "_", name.strip().lower())


def close_names(name: object, known: Iterable[object], n: int = 3) -> list[str]:
    """The known names closest to ``name`` (difflib ratio >= 0.6 after folding case and -/_/.), best first.

    Example:
        >>> close_names("Sapiens2-0.4B", ["sapiens2_0.4b", "sapiens2_1b", "pixels"])
        ['sapiens2_0.4b']
    """
    by_fold: dict[str, str] = {}
    for k in map(str, known):
        by_fold.setdefault(_folded(k), k)
    target = _folded(str(name))
    if target in by_fold:
        return [by_fold[target]]
    return [by_fold[m] for m in difflib.get_close_matches(target, list(by_fold), n=n, cutoff=0.6)]


class BenchError(Exception):
    """An expected failure with a message for the user (names the file, record or tensor)."""


class UnknownNameError(BenchError, KeyError, ValueError):
    """A name that is not among the known ones.

    Subclasses ``KeyError`` and ``ValueError`` so that callers written against either keep working.

    Args:
        kind: what is being looked up (``"task"``, ``"backbone arch"``, ...).
        name: the name asked for.
        known: the known names, listed in the message.

    Attributes:
        suggestions: the close known names (:func:`close_names`), offered as "did you mean".
    """

    def __init__(self, kind: str, name: object, known: Iterable[object]):
        self.kind, self.name, self.known = kind, name, [str(k) for k in known]
        self.suggestions = close_names(name, self.known)
        hint = f"; did you mean {' or '.join(map(repr, self.suggestions))}?" if self.suggestions else ";"
        super().__init__(f"unknown {kind} {name!r}{hint} known: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DatasetError(BenchError, ValueError):
    """Bad dataset or prediction file; the message names the file and the record."""


def where(path, record) -> str:
    """A location string ``path (record ...)`` for error messages.

    Example:
        >>> where("a.png", 3), where("a.png", None)
        ('a.png (record 3)', 'a.png')
    """
    rec = "" if record is None else f" (record {record})"
    return f"{path}{rec}"
