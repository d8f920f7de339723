"""What the stages pass to the record writer: the run, which record, and what the read-out produced."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.tasks import ProbeTask

# {task: [(seed, record path, run identity), ...]}
RunPlan = dict[str, list[tuple[int, Path, dict]]]


@dataclass(frozen=True)
class RunContext:
    """What every record of one ``run_probe`` call shares.

    Attributes:
        label: the backbone's (or reference row's) name in the records.
        backbone: the records' backbone description.
        protocol: the run's protocol.
        source: the data source (:func:`~benchmarks.probe.data.source.as_data_source`).
        device: the torch device.
        scratch: the run's scratch folder (a trained read-out's spilled train split goes below it).
    """

    label: str
    backbone: dict
    protocol: ProbeProtocol
    source: object
    device: str
    scratch: Path | None = None


@dataclass(frozen=True)
class RecordPlan:
    """The records a run writes and the ones it found done.

    Attributes:
        runs: ``{task: [(seed, record path, run identity), ...]}``.
        done: ``{(task, seed): the record found complete at its path, or None}``.
    """

    runs: RunPlan
    done: dict

    def todo(self, task: str) -> list[RecordSlot]:
        """The records of ``task`` left to write, by seed."""
        return [RecordSlot(task, seed, path, ident) for seed, path, ident in self.runs[task]
                if self.done[(task, seed)] is None]


@dataclass(frozen=True)
class RecordSlot:
    """One record to write: task name, decoder seed, path and run identity
    (:func:`~benchmarks.probe.records.runkey.run_identity`)."""

    task: str
    seed: int
    path: Path
    identity: dict


@dataclass(frozen=True)
class ReadoutResult:
    """What a read-out produced for one record besides its metrics.

    Attributes:
        info: the decoder's training info (``shortcut``, ``final_loss``, ``resumed_from``).
        timings: seconds per stage, or a callable returning them once the intervals are computed (so
            the bootstrap counts in the evaluation's seconds).
        num_test, num_train: test and train samples.
    """

    info: dict
    timings: dict | Callable[[], dict]
    num_test: int
    num_train: int


__all__ = ["ProbeTask", "ReadoutResult", "RecordPlan", "RecordSlot", "RunContext", "RunPlan"]
