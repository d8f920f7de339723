"""The typed read side of a result record: every reader asks the view, never the dict's keys.

A record is a JSON object checked by ``result.schema.json`` (:mod:`sapiens2.records.schema`). Readers
(the leaderboard, ``compare``, the terminal tables, the mean over seeds) wrap a validated record in
a :class:`RecordView` and read typed fields: the run identity, the task, the protocol (kind, id and
grouping key), the model, the dataset (and its identity key), the metrics with their intervals, the
std over seeds, the seeds, the provenance and the config. The view copies nothing and changes nothing:
the record's bytes and hashes stay what the writer made (:func:`sapiens2.records.results.make_record`).

Example:
    >>> rec = {"run_id": "r1", "task": "seg", "model": {"name": "pixels", "weights": "none"},
    ...        "protocol": {"kind": "probe", "protocol_id": "probe-v4-0123456789ab"},
    ...        "dataset": {"name": "synth", "split": "test", "content_hash": None},
    ...        "metrics": {"mIoU": 4.4, "mAcc": None}, "seeds": [0],
    ...        "intervals": {"level": 0.95, "method": "bootstrap", "n": 96, "bounds": {"mIoU": [4.1, 4.7]}}}
    >>> v = RecordView.of(rec)
    >>> v.protocol.key, v.dataset.key, v.model.name
    ('probe:probe-v4-0123456789ab', 'name:synth/test', 'pixels')
    >>> iv = v.interval("mIoU")
    >>> (iv.value, iv.lo, iv.hi, iv.n, iv.level, iv.method)
    (4.4, 4.1, 4.7, 96, 0.95, 'bootstrap')
    >>> v.interval("mAcc") is None, v.where
    (True, 'run r1')
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Union

from sapiens2.records.integrity import record_hash

#: the private key under which ``load_records`` keeps the file a record was read from
PATH_KEY = "_path"
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def protocol_key(kind: str, protocol_id: str | None) -> str:
    """The grouping key of a protocol: results with different keys are never ranked together.

    Example:
        >>> protocol_key("eval", None), protocol_key("probe", "probe-v4-0123456789ab")
        ('eval', 'probe:probe-v4-0123456789ab')
    """
    if kind == "eval":
        return f"eval:{protocol_id}" if protocol_id else "eval"
    return f"probe:{protocol_id}"


def _frozen(d: Mapping | None) -> Mapping[str, Any]:
    return _EMPTY if not d else MappingProxyType(d)


@dataclass(frozen=True)
class ModelRef:
    """A record's ``model``: its name, backbone, parameter count, weights text and checkpoint."""

    name: str
    backbone: str | None = None
    params: int | None = None
    weights: str | None = None
    checkpoint_path: str | None = None
    checkpoint_sha256: str | None = None
    _raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> ModelRef:
        ckpt = d.get("checkpoint") or {}
        return cls(d["name"], d.get("backbone"), d.get("params"), d.get("weights"), ckpt.get("path"),
                   ckpt.get("sha256"), _raw=d)

    @property
    def random_init(self) -> bool:
        """True for a seeded random initialisation (``weights`` starting with ``random``)."""
        return str(self.weights or "").startswith("random")

    def as_dict(self) -> dict[str, Any]:
        """A copy of the record's ``model`` object (for a writer that carries it into a new record)."""
        return copy.deepcopy(dict(self._raw))


@dataclass(frozen=True)
class DatasetRef:
    """A record's ``dataset``: name, split, content hash, number of samples and root."""

    name: str
    split: str
    content_hash: str | None = None
    num_samples: int | None = None
    root: str | None = None
    _raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> DatasetRef:
        return cls(d["name"], d["split"], d.get("content_hash"), d.get("num_samples"), d.get("root"), _raw=d)

    @property
    def label(self) -> str:
        """``name/split``."""
        return f"{self.name}/{self.split}"

    @property
    def key(self) -> str:
        """The dataset's identity: its content hash, or ``name/split`` when it has none."""
        return f"sha256:{self.content_hash}" if self.content_hash else f"name:{self.label}"

    def as_dict(self) -> dict[str, Any]:
        """A copy of the record's ``dataset`` object."""
        return copy.deepcopy(dict(self._raw))


@dataclass(frozen=True)
class ProtocolRef:
    """A record's ``protocol``: kind (``eval`` or ``probe``), id and description."""

    kind: str
    id: str | None = None
    description: str | None = None
    _raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> ProtocolRef:
        return cls(d["kind"], d.get("protocol_id"), d.get("description"), _raw=d)

    @property
    def key(self) -> str:
        """The grouping key (:func:`protocol_key`)."""
        return protocol_key(self.kind, self.id)

    def as_dict(self) -> dict[str, Any]:
        """A copy of the record's ``protocol`` object."""
        return copy.deepcopy(dict(self._raw))


@dataclass(frozen=True)
class Intervals:
    """A record's ``intervals``: how they were made and the bounds of each metric (record units).

    Attributes:
        level: coverage (0.95).
        method: ``bootstrap`` (over test images) or ``seeds``.
        n: test images.
        bounds: ``{metric key: (low, high)}``.
        resamples, seed: of a bootstrap (None otherwise).
        side_file, images_sha256, bootstrap_sha256: the bootstrap side file beside the record, the
            hash of its image ids and of its values (None when the record names none).
    """

    level: float
    method: str
    n: int
    bounds: Mapping[str, tuple[float, float]]
    resamples: int | None = None
    seed: int | None = None
    side_file: str | None = None
    images_sha256: str | None = None
    bootstrap_sha256: str | None = None
    _raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> Intervals:
        bounds = {k: (float(b[0]), float(b[1])) for k, b in (d.get("bounds") or {}).items()}
        return cls(d.get("level"), d.get("method"), d.get("n"), MappingProxyType(bounds), d.get("resamples"),
                   d.get("seed"), d.get("side_file"), d.get("images_sha256"), d.get("bootstrap_sha256"),
                   _raw=d)

    def as_dict(self) -> dict[str, Any]:
        """A copy of the record's ``intervals`` object (bounds as ``[low, high]`` lists, as stored)."""
        return copy.deepcopy(dict(self._raw))

    def without_side_file(self) -> dict[str, Any]:
        """:meth:`as_dict` without the side-file fields (for a record that no single side file stands for)."""
        return {k: v for k, v in self.as_dict().items() if k not in ("side_file", "bootstrap_sha256")}


@dataclass(frozen=True)
class MetricInterval:
    """One metric of a record with its interval: ``value`` in ``[lo, hi]`` at ``level`` over ``n``."""

    value: float | None
    lo: float
    hi: float
    n: int | None
    level: float | None
    method: str | None
    resamples: int | None = None


@dataclass(frozen=True)
class Provenance:
    """A record's ``provenance``: the package, source state and versions that made it."""

    package: str | None = None
    package_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    python: str | None = None
    torch_version: str | None = None
    numpy_version: str | None = None
    platform: str | None = None
    command: tuple[str, ...] | None = None

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> Provenance:
        d = d or {}
        cmd = d.get("command")
        return cls(d.get("package"), d.get("package_version"), d.get("git_commit"), d.get("git_dirty"),
                   d.get("python"), d.get("torch_version"), d.get("numpy_version"), d.get("platform"),
                   None if cmd is None else tuple(cmd))


class RecordView:
    """A read-only, typed view of one validated result record (see the module docstring).

    Build it with :meth:`of` from a record that :func:`~sapiens2.records.results.read_record`,
    :func:`~sapiens2.records.results.load_records` or :func:`~sapiens2.records.results.make_record`
    returned (they validate it); ``of`` returns a view unchanged, so functions accept either.

    Attributes:
        path: the file the record was read from (``load_records`` keeps it), or None.
    """

    __slots__ = ("_rec", "path")

    def __init__(self, record: Mapping[str, Any], path: str | None = None):
        if not isinstance(record, Mapping):
            raise TypeError(f"RecordView: expected a result record (a mapping), got {type(record).__name__}")
        self._rec = record
        self.path = str(path) if path is not None else record.get(PATH_KEY)

    @classmethod
    def of(cls, record: RecordView | Mapping[str, Any]) -> RecordView:
        """The view of ``record`` (a view is returned as it is)."""
        return record if isinstance(record, RecordView) else cls(record)

    def __repr__(self) -> str:
        return f"RecordView({self.where!r}, task={self._rec.get('task')!r})"

    # identity
    @property
    def run_id(self) -> str:
        return self._rec["run_id"]

    @property
    def created_utc(self) -> str:
        return self._rec.get("created_utc") or ""

    @property
    def schema_version(self) -> int:
        return self._rec["schema_version"]

    @property
    def record_hash(self) -> str | None:
        return self._rec.get("record_hash")

    @property
    def config_hash(self) -> str:
        return self._rec["config_hash"]

    @property
    def where(self) -> str:
        """The record's file, or ``run <run id>`` for a record not read from a file (for messages)."""
        return self.path or f"run {self._rec.get('run_id')}"

    # what was measured
    @property
    def task(self) -> str:
        return self._rec["task"]

    @property
    def model(self) -> ModelRef:
        return ModelRef.of(self._rec["model"])

    @property
    def dataset(self) -> DatasetRef:
        return DatasetRef.of(self._rec["dataset"])

    @property
    def protocol(self) -> ProtocolRef:
        return ProtocolRef.of(self._rec["protocol"])

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(self._rec.get("seeds") or ())

    # the numbers
    @property
    def metrics(self) -> Mapping[str, float | None]:
        return MappingProxyType(self._rec["metrics"])

    @property
    def metrics_std(self) -> Mapping[str, float | None]:
        return _frozen(self._rec.get("metrics_std"))

    @property
    def intervals(self) -> Intervals | None:
        iv = self._rec.get("intervals")
        return None if iv is None else Intervals.of(iv)

    def metric(self, key: str) -> float | None:
        """The value of metric ``key`` (None when the record has none or it is null)."""
        return self._rec["metrics"].get(key)

    def interval(self, key: str) -> MetricInterval | None:
        """Metric ``key`` with its interval, or None when the record bounds no such metric."""
        iv = self.intervals
        if iv is None or key not in iv.bounds:
            return None
        lo, hi = iv.bounds[key]
        return MetricInterval(self.metric(key), lo, hi, iv.n, iv.level, iv.method, iv.resamples)

    def metric_intervals(self) -> dict[str, MetricInterval]:
        """:meth:`interval` of every bounded metric, by metric key."""
        iv = self.intervals
        return {} if iv is None else {k: self.interval(k) for k in iv.bounds}

    @property
    def breakdowns(self) -> Mapping[str, Mapping[str, float | None]]:
        return _frozen(self._rec.get("breakdowns"))

    @property
    def timings(self) -> Mapping[str, float]:
        return _frozen(self._rec.get("timings"))

    # how it was made
    @property
    def provenance(self) -> Provenance:
        return Provenance.of(self._rec.get("provenance"))

    @property
    def config(self) -> Mapping[str, Any]:
        return _frozen(self._rec.get("config"))

    @property
    def conventions(self) -> Mapping[str, Any]:
        return _frozen(self._rec.get("conventions"))

    @property
    def device_type(self) -> str:
        return (self._rec.get("device") or {}).get("type") or "cpu"

    @property
    def notes(self) -> str | None:
        return self._rec.get("notes")

    @property
    def metric_decls(self) -> Mapping[str, Mapping[str, Any]]:
        """What each metric means, as the record declares it (``{}``: a record of schema minor 0)."""
        return self._rec.get("metric_decls") or {}

    def content_hash(self) -> str:
        """The record's hash recomputed over its content (:func:`~sapiens2.records.integrity.record_hash`)."""
        return record_hash(self._rec)

    def as_dict(self) -> dict[str, Any]:
        """A deep copy of the record (without the private ``_path``)."""
        return {k: copy.deepcopy(v) for k, v in self._rec.items() if k != PATH_KEY}


#: what a reader accepts: a validated record dict or its view
Record = Union[RecordView, Mapping[str, Any]]


def record_views(records: Iterable[Record]) -> list[RecordView]:
    """:meth:`RecordView.of` of each record."""
    return [RecordView.of(r) for r in records]
