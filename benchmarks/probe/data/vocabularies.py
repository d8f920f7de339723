"""The keypoint and label sets of the data, read before any work: they size the tasks and enter their ids."""

from __future__ import annotations

from benchmarks.probe.data.source import DataSource
from benchmarks.probe.protocol import ProbeProtocol
from benchmarks.probe.tasks import build_task


def data_vocabularies(protocol: ProbeProtocol, tasks: list[str],
                      source: DataSource) -> tuple[ProbeProtocol, dict]:
    """The protocol with each task's vocabulary field set from the data, and the data's sets by task.

    A task's set is the one its train and test splits' readers name (they must agree); a set that is
    the task's default is left empty in the protocol (the ids of default-vocabulary runs never change).

    Raises:
        ValueError: the train and test splits name different sets, or the protocol names another set.
    """
    vocabs = {}
    for t in tasks:
        task = build_task(t, protocol)
        kind, field_name = task.vocabulary_kind, protocol.task(t).VOCABULARY_FIELD
        if not kind or not field_name:
            continue
        splits = (protocol.train_split, protocol.test_split)
        found = [source.vocabulary(t, split, protocol) for split in splits]
        if found[0] is None and found[1] is None:
            continue
        ids = []
        for v in found:
            task.use_vocabulary(v)  # a protocol that names another set fails here
            ids.append(task.vocabulary()[kind])
        if ids[0] != ids[1]:
            raise ValueError(
                f"data {source.name}: the {t} {protocol.train_split!r} split's {kind} is {ids[0]!r} but the "
                f"{protocol.test_split!r} split's is {ids[1]!r}"
            )
        vocabs[t] = found[1] if found[1] is not None else found[0]
        named = "" if ids[1] == task.default_vocabulary else ids[1]
        if getattr(protocol.task(t), field_name) != named:
            protocol = protocol.replace(tasks={t: {field_name: named}})
    return protocol, vocabs
