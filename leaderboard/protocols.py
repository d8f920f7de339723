"""Human-readable protocol names and the knobs of each protocol, read from the records' configs.

A table's protocol key (``probe:probe-v3-4c3b8eda1ef1``) is exact but unreadable. The report shows a
name (``probe v3 (default)``, given by the caller for the protocols it knows, or made from the
stored protocol: ``probe v3 (64x48 input, 30 iterations)``), the short hash, the description the
records carry and every knob of the stored protocol config, with the knobs that differ between the
probe protocols of the report marked.

Example:
    >>> rec = {"task": "seg", "protocol": {"kind": "probe", "protocol_id": "probe-v3-0123456789ab"},
    ...        "config": {"protocol": {"version": 3, "input_size": [64, 48], "iterations": 30}}}
    >>> info = protocol_infos([rec])["probe:probe-v3-0123456789ab"]
    >>> info.label, info.short_hash, info.knobs[0]
    ('probe v3 (64x48 input, 30 iterations)', '0123456789ab', ('input_size', '[64, 48]'))
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from leaderboard.paper import PAPER_PROBE_PROTOCOL_ID
from sapiens2.records.view import Record, RecordView, record_views

#: config keys that describe one run rather than its protocol (left out of the knob list)
RUN_KEYS = ("backbone", "seed", "run", "task", "num_train_samples", "shortcut", "model_files", "data",
            "checkpoint", "weights")


@dataclass
class ProtocolInfo:
    """What the report says about one protocol key.

    Attributes:
        key: the grouping key (``eval``, ``eval:<id>``, ``probe:<id>``).
        label: human-readable name.
        short_hash: a probe id's hash part (``4c3b8eda1ef1``); "" for other ids (their label names them).
        description: the records' ``protocol.description`` ("" when none).
        knobs: ``(dotted name, value text)`` of every stored knob, sorted by name.
        differs: knob names whose value differs between the report's probe protocols.
    """

    key: str
    label: str
    short_hash: str = ""
    description: str = ""
    knobs: list[tuple[str, str]] = field(default_factory=list)
    differs: set[str] = field(default_factory=set)

    @property
    def anchor(self) -> str:
        """A DOM-safe id of the protocol's panel."""
        return "p-" + "".join(c if c.isalnum() else "-" for c in self.key)[:80]


def flatten(obj, prefix: str = "") -> dict[str, str]:
    """Nested dicts as ``{"a.b": "value"}``; lists and scalars as compact JSON text.

    Example:
        >>> flatten({"tasks": {"pose": {"sigma": 2.0}}, "input_size": [256, 192], "mode": "pad"})
        {'tasks.pose.sigma': '2.0', 'input_size': '[256, 192]', 'mode': 'pad'}
    """
    out: dict[str, str] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(", ", ": "))
    out[prefix[:-1]] = text
    return out


def _knobs(rec: RecordView) -> dict[str, str]:
    cfg = rec.config
    if isinstance(cfg.get("protocol"), Mapping):
        return flatten(cfg["protocol"])
    return flatten({k: v for k, v in cfg.items() if k not in RUN_KEYS})


def _auto_label(kind: str, pid: str | None, knobs: dict[str, str]) -> str:
    if kind == "eval":
        return f"eval {pid}" if pid else "official task-model evaluation"
    if pid == PAPER_PROBE_PROTOCOL_ID:
        return "paper Table 2 probing (decoder unpublished)"
    version = knobs.get("version") or (pid.split("-")[1][1:] if pid and pid.startswith("probe-v") else "?")
    parts = []
    try:
        h, w = json.loads(knobs.get("input_size", "null")) or (None, None)
        if h is not None:  # a protocol without the knob says nothing of it (no "NonexNone input")
            parts.append(f"{h}x{w} input")
    except (TypeError, ValueError):
        pass
    if "iterations" in knobs:
        parts.append(f"{knobs['iterations']} iterations")
    return f"probe v{version}" + (f" ({', '.join(parts)})" if parts else "")


def protocol_infos(records: list[Record], names: Mapping[str, str] | None = None) -> dict[str, ProtocolInfo]:
    """A ``ProtocolInfo`` for every protocol key of ``records``.

    Args:
        records: result records (or their views).
        names: optional protocol id (or key) -> name, for the protocols the caller knows
            (``{"probe-v3-4c3b8eda1ef1": "probe v3 quick"}``).

    Returns:
        ``{protocol key: ProtocolInfo}``. A knob whose value differs between records of one
        protocol (an eval protocol run with several configs) reads ``varies: a | b``.
    """
    names = dict(names or {})
    values: dict[str, dict[str, set[str]]] = {}
    meta: dict[str, tuple[str, str | None, str]] = {}
    tasks: dict[str, set[str]] = {}
    for rec in record_views(records):
        proto, key = rec.protocol, rec.protocol.key
        tasks.setdefault(key, set()).add(rec.task)
        meta.setdefault(key, (proto.kind, proto.id, proto.description or ""))
        for k, v in _knobs(rec).items():
            values.setdefault(key, {}).setdefault(k, set()).add(v)
    infos = {}
    for key, (kind, pid, desc) in meta.items():
        knobs = {k: (next(iter(v)) if len(v) == 1 else "varies: " + " | ".join(sorted(v)))
                 for k, v in values.get(key, {}).items()}
        label = names.get(pid or "") or names.get(key) or _auto_label(kind, pid, knobs)
        short = pid.rsplit("-", 1)[-1] if pid and pid.startswith("probe-v") else ""
        infos[key] = ProtocolInfo(key, label, short, desc, sorted(knobs.items()))
    probes = [i for i in infos.values() if i.key.startswith("probe:")]
    for info in probes:
        mine = dict(info.knobs)
        for other in probes:  # a probe protocol is a task's: compared with those of the same task
            if not tasks[info.key] & tasks[other.key]:
                continue
            theirs = dict(other.knobs)
            info.differs |= {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
    return infos


def paper_protocol_info(key: str) -> ProtocolInfo:
    """The info of a protocol known only from the paper (Tables 2-8)."""
    kind, _, pid = key.partition(":")
    return ProtocolInfo(key, _auto_label(kind, pid or None, {}), "", "the paper's protocol (as printed)")
