"""What identifies one probe run, so that a done record or a decoder checkpoint is reused only for it.

A record is a done marker, and a decoder checkpoint is resumed, only when it was made with the same
protocol id, the same data (content hashes of the train and test splits), the same backbone (its
resolved config) with the same weights (SHA-256 of every tensor), the same task and the same seed.

Example:
    >>> from benchmarks.probe.records.runkey import run_identity, run_mismatch
    >>> a = run_identity("probe-v3-x", {"train": "1", "test": "2"}, {"spec": "pixels"}, "seg", 0)
    >>> run_mismatch(a, dict(a)) is None
    True
    >>> run_mismatch(a, {**a, "data": {"test": "3", "train": "1"}})
    "another dataset (data: {'test': '2', 'train': '1'} there, {'test': '3', 'train': '1'} now)"
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import torch

_WHAT = {
    "protocol_id": "another protocol",
    "data": "another dataset",
    "backbone": "another backbone or other weights",
    "task": "another task",
    "seed": "another seed",
}


def weights_sha256(module: torch.nn.Module) -> str:
    """SHA-256 over every tensor of ``module.state_dict()`` (names, dtypes, shapes and all bytes).

    Example:
        >>> lin = torch.nn.Linear(2, 2)
        >>> h = weights_sha256(lin)
        >>> with torch.no_grad():
        ...     lin.bias[-1] += 1
        >>> weights_sha256(lin) != h
        True
    """
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def run_identity(protocol_id: str, data: dict, backbone: dict, task: str, seed: int) -> dict:
    """The JSON-ready identity of one (protocol, data, backbone, task, seed) run.

    Args:
        protocol_id: the task's ``ProbeProtocol.protocol_id(task)``.
        data: content hashes of the splits used, e.g. ``{"train": ..., "test": ...}``.
        backbone: the resolved backbone config and its weights hash
            (``{"spec": ..., "weights_sha256": ...}``).
        task: task name.
        seed: decoder seed.

    Returns:
        A dict stored in every record (``config.run``) and decoder checkpoint (``run``).
    """
    identity = {
        "protocol_id": str(protocol_id),
        "data": {str(k): str(v) for k, v in sorted(data.items())},
        "backbone": backbone,
        "task": str(task),
        "seed": int(seed),
    }
    # as it reads back from a JSON record (tuples become lists), so stored and wanted compare equal
    return json.loads(json.dumps(identity, sort_keys=True, default=str))


def run_mismatch(stored: dict | None, wanted: dict) -> str | None:
    """None when ``stored`` is the identity ``wanted``; otherwise what differs, in words."""
    if stored == wanted:
        return None
    if not isinstance(stored, dict):
        return "it records no run identity (made by an older version)"
    diffs = []
    for k in wanted:
        if stored.get(k) != wanted[k]:
            diffs.append(f"{_WHAT.get(k, k)} ({k}: {_short(stored.get(k))} there, {_short(wanted[k])} now)")
    extra = sorted(set(stored) - set(wanted))
    if extra:
        diffs.append(f"other identity keys {extra}")
    return "; ".join(diffs)


def _short(v: object, limit: int = 160) -> str:
    s = repr(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def seed_list(seeds: int | str | Iterable[int]) -> list[int]:
    """Decoder seeds from a comma string (``--seeds``) or an iterable: integers, at least one, no repeats.

    Raises:
        ValueError: naming ``--seeds``, the value and what is wrong.

    Example:
        >>> seed_list("0, 1,2")
        [0, 1, 2]
    """
    items = [s.strip() for s in seeds.split(",")] if isinstance(seeds, str) else list(seeds)
    try:
        out = [int(s) for s in items if not isinstance(s, str) or s]
    except (TypeError, ValueError):
        raise ValueError(f"--seeds {seeds!r}: expected comma-separated integers, e.g. 0,1,2") from None
    if not out:
        raise ValueError(f"--seeds {seeds!r}: no seed given")
    repeated = sorted({s for s in out if out.count(s) > 1})
    if repeated:
        raise ValueError(f"--seeds {seeds!r}: seed(s) {repeated} given twice; each seed is one record")
    return out
