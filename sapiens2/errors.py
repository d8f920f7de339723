"""Error types shared by every layer.

``BenchError`` is the base of every expected failure (bad input, a missing file, an unknown name):
the CLI turns it into one message and a non-zero exit (``--debug`` shows the traceback).
``UnknownNameError`` is raised wherever a name is looked up (archs, tasks, registries, presets)
and always lists the known names.

Example:
    >>> from sapiens2.errors import UnknownNameError
    >>> raise UnknownNameError("task", "depth", ["pose", "seg"])
    Traceback (most recent call last):
    ...
    sapiens2.errors.UnknownNameError: unknown task 'depth'; known: pose, seg
"""

from __future__ import annotations

from collections.abc import Iterable


class BenchError(Exception):
    """An expected failure with a message for the user (names the file, record or tensor)."""


class UnknownNameError(BenchError, KeyError, ValueError):
    """A name that is not among the known ones.

    Subclasses ``KeyError`` and ``ValueError`` so that callers written against either keep working.

    Args:
        kind: what is being looked up (``"task"``, ``"backbone arch"``, ...).
        name: the name asked for.
        known: the known names, listed in the message.
    """

    def __init__(self, kind: str, name: object, known: Iterable[object]):
        self.kind, self.name, self.known = kind, name, [str(k) for k in known]
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])
