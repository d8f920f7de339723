"""Before any fit, the ranks of a distributed probe check that they run the same thing.

Each rank reads its own ``--data``, ``--weights`` and task list; a node with a stale local copy of the
split, or a launcher that passed other flags to one rank, would otherwise mix two runs into one record
(the sums of both shards reduced together) or abort inside the collective library with no word. Every
rank all-gathers its run identity (:func:`rank_identity`: tasks, seeds, the splits' identities, the
protocol ids, the backbone's spec and weights hash) and every rank raises the same
:class:`RankMismatchError` naming the differing fields and which ranks hold which value, so all ranks
stop together at the same point (none is left waiting in a collective).

Paths are not compared: two nodes may hold the same split, or the same weights, at different paths;
the content hashes say whether they are the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError

if TYPE_CHECKING:
    from benchmarks.probe.protocol import ProbeProtocol

__all__ = ["RankMismatchError", "check_ranks_agree", "rank_identity"]

# what each field is, in the words of the flags that set it
_MEANING = {
    "tasks": "the task list (--tasks)",
    "seeds": "the decoder seeds (--seeds)",
    "data": "the data's content identity (--data: another or changed copy of the split)",
    "protocol": "the protocol ids (--protocol, --quick, the data's keypoint / label sets)",
    "backbone": "the backbone (its resolved config, or its weights' SHA-256: --weights)",
}
_SHOWN = 3  # differing fields named in the message (the rest are counted)


class RankMismatchError(BenchError, ValueError):
    """The ranks of a distributed run do not run the same probe (raised on every rank)."""


def rank_identity(tasks: Sequence[str], seeds: Sequence[int], data_ids: dict, protocol: ProbeProtocol,
                  backbone_id: dict) -> dict:
    """This rank's run identity, as :func:`check_ranks_agree` compares it.

    Args:
        tasks: the task names, in order.
        seeds: the decoder seeds.
        data_ids: ``{task: {"train": id, "test": id}}`` (the splits' identities).
        protocol: the :class:`~benchmarks.probe.protocol.ProbeProtocol` (its per-task ids are compared).
        backbone_id: the backbone's identity (``{"spec", "weights_sha256"}`` or the reference row's).
    """
    return {
        "tasks": list(tasks),
        "seeds": [int(s) for s in seeds],
        "data": {t: dict(data_ids[t]) for t in tasks},
        "protocol": {t: protocol.protocol_id(t) for t in tasks},
        "backbone": backbone_id,
    }


def _flat(value: object, prefix: str) -> dict[str, str]:
    """Leaf values of nested dicts under dotted keys, each as canonical JSON."""
    if isinstance(value, dict) and value:
        out: dict[str, str] = {}
        for k in sorted(value, key=str):
            out.update(_flat(value[k], f"{prefix}.{k}"))
        return out
    return {prefix: json.dumps(value, sort_keys=True, default=str)}


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:40] + "..." + text[-12:]


def mismatch_message(identities: list[dict]) -> str | None:
    """The message naming what differs between ranks (None: every rank runs the same thing)."""
    fields: list[tuple[str, list[str | None]]] = []
    for top in identities[0]:
        flats = [_flat(ident.get(top), top) for ident in identities]
        keys = sorted({k for f in flats for k in f})
        for key in keys:
            values = [f.get(key) for f in flats]
            if len(set(values)) > 1:
                fields.append((key, values))
        if fields and top == "tasks":  # other task lists make every per-task field differ: say only this
            break
    if not fields:
        return None
    parts = []
    for key, values in fields[:_SHOWN]:
        by_value: dict[str | None, list[int]] = {}
        for rank, v in enumerate(values):
            by_value.setdefault(v, []).append(rank)
        held = "; ".join(
            f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}: "
            f"{'(none)' if v is None else _short(v)}" for v, r in by_value.items()
        )
        parts.append(f"{key} [{_MEANING.get(key.split('.')[0], key)}] differs ({held})")
    more = f"; and {len(fields) - _SHOWN} more field(s)" if len(fields) > _SHOWN else ""
    return (
        f"the {len(identities)} ranks of this distributed run do not run the same probe: "
        + "; ".join(parts) + more
        + ". Give every rank the same --tasks, --seeds, protocol, weights and the same data (same content)"
    )


def check_ranks_agree(identity: dict) -> None:
    """All-gather ``identity`` (:func:`rank_identity`) and stop every rank when they differ.

    A no-op on one process.

    Raises:
        RankMismatchError: on every rank, naming the differing fields and the ranks holding each value.
    """
    identities = dist_utils.all_gather_object(identity)
    why = mismatch_message(identities)
    if why is not None:
        raise RankMismatchError(why)
