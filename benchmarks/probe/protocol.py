"""The dense-probing protocol as one nested, typed config, with one hashable protocol per task.

Every knob that changes a probe's numbers lives in :class:`ProbeProtocol`, in one of its groups
(:mod:`benchmarks.probe.config`: ``input``, ``readout``, ``body``, ``bootstrap``, ``data``) or in a
task's settings (``tasks``). Each task has its own protocol id: :meth:`ProbeProtocol.task_protocol`
is the part of the protocol that task's numbers depend on (the shared groups, the groups its
read-out declares, :attr:`~benchmarks.probe.readout.base.ProbeReadout.protocol_groups`, and that
task's settings), and :meth:`ProbeProtocol.protocol_id` hashes it (canonical JSON, SHA-256). Every
result record carries its task's id and stores that part, flat, as its ``config["protocol"]``, so
results made under different protocols are never ranked together, and a change to one task's knob
leaves the other tasks' ids (and records) as they are.

A group's field also reads by its flat name (``p.lr is p.body.lr``), and the constructor,
:meth:`ProbeProtocol.replace` and :meth:`ProbeProtocol.from_dict` take flat names: a record's stored
protocol and a JSON file of overrides are flat.

Example:
    >>> from benchmarks.probe.protocol import ProbeProtocol
    >>> p = ProbeProtocol()
    >>> p.protocol_id("seg").startswith("probe-")
    True
    >>> p.replace(tasks={"pose": {"sigma": 3.0}}).protocol_id("seg") == p.protocol_id("seg")
    True
    >>> "lr" in p.task_protocol("seg"), "lr" in body_protocol().task_protocol("seg")
    (False, True)
    >>> p.replace(lr=0.01).body.lr, p.tapped_layers(12)
    (0.01, [2, 5, 8, 11])
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from benchmarks.probe.config import (
    GROUPS,
    SHARED_GROUPS,
    BodyConfig,
    BootstrapConfig,
    DataConfig,
    InputConfig,
    ReadoutConfig,
    check_field_types,
    checked_keys,
    group_fields,
    group_of,
)
from benchmarks.probe.readout.base import get_readout, readout_names
from benchmarks.probe.readout.shrink import MASKED_FORMS
from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks import probe_task_class, probe_task_names
from sapiens2.errors import UnknownNameError
from sapiens2.records.integrity import protocol_id

PROTOCOL_VERSION = 5
# a masked task's read-out form ("": the task is not masked)
MASKED_READOUTS = ("", *MASKED_FORMS)


def settings_class(name: str) -> type[TaskSettings]:
    """The settings class task ``name`` registered (``ProbeTask.settings_class``).

    Raises:
        UnknownNameError: no probe task of that name is registered.
    """
    return probe_task_class(name).settings_class


def default_task_settings(decoder: str = "linear") -> dict[str, TaskSettings]:
    """Every registered probe task's default settings (its settings class's defaults) with ``decoder``.

    ``decoder="linear"`` is the closed-form linear read-out (the headline: nothing trained, so the
    score is what the features hold linearly); the losses and the body's knobs apply to a read-out
    that trains, ``decoder="pixelshuffle"`` (:func:`body_protocol`).
    """
    return {name: settings_class(name)(decoder=decoder) for name in probe_task_names()}


def task_settings(name: str, value: TaskSettings | dict) -> TaskSettings:
    """Task ``name``'s settings from a settings object or a dict of its fields.

    Raises:
        UnknownNameError: an unknown task, or a key the task's settings do not have.
    """
    cls = settings_class(name)
    if isinstance(value, TaskSettings):
        if type(value) is not cls:
            raise ValueError(f"protocol.tasks[{name!r}]: expected {cls.__name__}, got {type(value).__name__}")
        return value
    if not isinstance(value, dict):
        raise ValueError(f"protocol.tasks[{name!r}]: expected a dict of settings, got {value!r}")
    return cls(**checked_keys(value, cls, f"protocol.tasks[{name!r}] key"))


def _known_keys() -> list[str]:
    return sorted(["version", "tasks", *GROUPS, *(k for g in GROUPS for k in group_fields(g))])


@dataclass(frozen=True, init=False)
class ProbeProtocol:
    """One probing protocol: everything that defines how a frozen backbone is probed.

    Args:
        version: the protocol version (the ids' prefix).
        tasks: per-task settings (:class:`TaskSettings` or the task's subclass of it: read-out, output
            stride, loss and the task's own knobs, e.g. ``tasks["pose"].sigma``; default: every task's
            defaults with the linear read-out).
        **groups_and_fields: a group by name (``body=BodyConfig(lr=0.01)`` or a dict of its fields),
            or any group field by its flat name (``lr=0.01``), applied over the group.

    Attributes:
        input: :class:`~benchmarks.probe.config.InputConfig` (image size, padding, taps, dtypes).
        readout: :class:`~benchmarks.probe.config.ReadoutConfig` (the closed-form fit's knobs).
        body: :class:`~benchmarks.probe.config.BodyConfig` (a trained body's widths and optimiser).
        bootstrap: :class:`~benchmarks.probe.config.BootstrapConfig` (the records' intervals).
        data: :class:`~benchmarks.probe.config.DataConfig` (splits and caps).
    """

    version: int
    input: InputConfig
    readout: ReadoutConfig
    body: BodyConfig
    bootstrap: BootstrapConfig
    data: DataConfig
    tasks: dict

    def __init__(self, version: int = PROTOCOL_VERSION, tasks: dict | None = None,
                 **groups_and_fields: object):
        flat: dict[str, dict] = {g: {} for g in GROUPS}
        groups = {}
        for key, value in groups_and_fields.items():
            if key in GROUPS:
                cls = GROUPS[key]
                groups[key] = value if isinstance(value, cls) else cls(
                    **checked_keys(dict(value), cls, f"protocol.{key} key"))
            elif group_of(key) is not None:
                flat[group_of(key)][key] = value
            else:
                raise UnknownNameError("probe protocol key", key, _known_keys())
        for name, cls in GROUPS.items():
            group = groups.get(name) or cls()
            if flat[name]:
                group = dataclasses.replace(group, **checked_keys(flat[name], cls, "probe protocol key"))
            object.__setattr__(self, name, group)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "tasks", default_task_settings() if tasks is None else tasks)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: a group's field read by its flat name
        group = group_of(name)
        if group is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(object.__getattribute__(self, group), name)

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")
        for name, ts in self.tasks.items():
            task_settings(name, ts)  # a known task with its own settings class
            check_field_types(ts, f"protocol.tasks[{name!r}]")
            if ts.masked_readout not in MASKED_READOUTS:
                raise ValueError(f"protocol.tasks[{name!r}].masked_readout: expected one of "
                                 f"{MASKED_READOUTS}, got {ts.masked_readout!r}")
            if ts.decoder not in readout_names():
                raise ValueError(f"protocol.tasks[{name!r}].decoder: expected a registered read-out "
                                 f"({', '.join(readout_names())}), got {ts.decoder!r}")
            if get_readout(ts.decoder).needs_shortcut and self.readout.shortcut == "none":
                raise ValueError(f"protocol: the {ts.decoder!r} decoder is the ridge shortcut; it needs "
                                 "shortcut='ridge'")

    def task(self, name: str) -> TaskSettings:
        """Settings of task ``name`` (KeyError naming the known tasks otherwise)."""
        if name not in self.tasks:
            raise UnknownNameError("task of the protocol", name, sorted(self.tasks))
        return self.tasks[name]

    def tapped_layers(self, num_layers: int) -> list[int]:
        """0-based block indices to tap: ``num_tapped_layers`` evenly spaced, the last one included."""
        n = max(1, min(self.input.num_tapped_layers, num_layers))
        return sorted({(i + 1) * num_layers // n - 1 for i in range(n)})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready flat dict of every field (tuples as lists): what records store."""
        d: dict[str, Any] = {"version": self.version}
        for name in GROUPS:
            d.update(dataclasses.asdict(getattr(self, name)))
        d["tasks"] = {name: dataclasses.asdict(ts) for name, ts in self.tasks.items()}
        return json.loads(json.dumps(d))

    def task_protocol(self, name: str) -> dict[str, Any]:
        """The part of the protocol task ``name``'s numbers depend on, as a flat JSON-ready dict.

        The shared groups' fields, the fields of the groups the task's read-out declares and ``tasks``
        holding that task's settings alone (without ``BODY_ONLY_FIELDS`` for a read-out that trains
        nothing, and without an empty vocabulary field: the task's default keypoint / label set). It
        is a valid protocol dict: ``ProbeProtocol.from_dict(view).task_protocol(name) == view`` (the
        fields left out are read by nothing that runs), and records store it as their
        ``config["protocol"]``.
        """
        settings = self.task(name)
        readout = get_readout(settings.decoder)
        d = self.to_dict()
        groups = (*SHARED_GROUPS, *readout.protocol_groups)
        covered = ("version", *(k for g in groups for k in group_fields(g)))
        view = {k: d[k] for k in covered}
        body_only = () if readout.trains else settings.BODY_ONLY_FIELDS
        vocab = settings.VOCABULARY_FIELD
        left_out = (*body_only, vocab) if vocab and not getattr(settings, vocab) else body_only
        if not settings.masked_readout:  # a task that is not masked: its ids never carried the field
            left_out = (*left_out, "masked_readout")
        view["tasks"] = {name: {k: v for k, v in d["tasks"][name].items() if k not in left_out}}
        return view

    def protocol_id(self, task: str) -> str:
        """``probe-v<version>-<12 hex>``: SHA-256 of the canonical JSON of :meth:`task_protocol`.

        The formula lives in :func:`sapiens2.records.integrity.protocol_id`, which record validation uses
        to check the id a record stores against the protocol dict in its config.
        """
        return protocol_id("probe", self.version, self.task_protocol(task))

    def protocol_ids(self) -> dict[str, str]:
        """Every task's protocol id, by task name (in the protocol's order)."""
        return {name: self.protocol_id(name) for name in self.tasks}

    def replace(self, **changes: object) -> ProbeProtocol:
        """A copy with ``changes`` applied (flat field names, group names or ``tasks``).

        ``tasks`` maps a task name to a dict of its changes (merged into that task's settings) or to
        a settings object; values may be JSON-style (lists for tuples), so a parsed JSON file of
        overrides can be passed as is.

        Raises:
            UnknownNameError: an unknown protocol key, task or task settings key.
        """
        tasks = self.tasks
        if "tasks" in changes:
            if not isinstance(changes["tasks"], dict):
                raise ValueError(f"protocol.tasks: expected a dict by task name, got {changes['tasks']!r}")
            tasks = dict(self.tasks)
            for name, value in changes.pop("tasks").items():
                if isinstance(value, dict) and name in tasks:
                    value = {**dataclasses.asdict(tasks[name]), **value}
                tasks[name] = task_settings(name, value)
        version = changes.pop("version", self.version)
        groups = {name: getattr(self, name) for name in GROUPS}
        for name, cls in GROUPS.items():
            if isinstance(changes.get(name), dict):  # a dict of changes merges into the group
                fields = checked_keys(changes.pop(name), cls, f"protocol.{name} key")
                groups[name] = dataclasses.replace(groups[name], **fields)
            elif name in changes:
                groups[name] = changes.pop(name)
        return type(self)(version, tasks, **groups, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> ProbeProtocol:
        """Inverse of :meth:`to_dict` (groups may also be given nested); unknown keys raise
        :class:`UnknownNameError` naming the known ones."""
        d = dict(d)
        tasks = d.pop("tasks", None)
        if tasks is not None:
            tasks = {k: task_settings(k, v) for k, v in tasks.items()}
        return cls(d.pop("version", PROTOCOL_VERSION), tasks, **d)


def default_protocol() -> ProbeProtocol:
    """The default protocol: the closed-form linear probe on every task (the headline read-out)."""
    return ProbeProtocol()


def body_protocol() -> ProbeProtocol:
    """The default protocol with the trained pixel-shuffle body on every task.

    Not the headline: on the synthetic split the body learns the tasks from random features about
    as well as from pretrained ones (docs/probing.md, "Validity"). Its own protocol id.
    """
    return ProbeProtocol(tasks=default_task_settings("pixelshuffle"))


def quick_protocol() -> ProbeProtocol:
    """A much cheaper protocol for tests (different ``protocol_id``; never ranked with the default)."""
    return ProbeProtocol(
        input_size=(64, 48),
        tasks=default_task_settings("pixelshuffle"),
        bootstrap_resamples=200,
        iterations=30,
        batch_size=4,
        warmup_iters=3,
        decoder_channels=16,
        decoder_min_channels=16,
        max_train_samples=8,
        max_test_samples=4,
    )


def _check_field_names() -> None:
    """No flat field name is taken twice (by two groups, or by a group and a top-level field)."""
    names = [k for g in GROUPS for k in group_fields(g)]
    taken = {"version", "tasks", *GROUPS}
    clashes = sorted({k for k in names if names.count(k) > 1 or k in taken})
    if clashes:
        raise RuntimeError(f"benchmarks.probe.config: flat field names taken twice: {clashes}")


_check_field_names()
