"""The result-record format: its JSON Schema, its writer and validated reader, and its typed view.

Producers (``benchmarks.probe``, ``benchmarks.reproduce``, ``benchmarks.systems``) and readers (the
``leaderboard``, ``compare``) all depend on this bottom-layer package, never on each other:

- :mod:`sapiens2.records.schema`: ``result.schema.json``, ``SCHEMA_ID``, ``SCHEMA_VERSION``,
  ``validate``;
- :mod:`sapiens2.records.integrity`: the canonical hashes and the probe protocol id formula;
- :mod:`sapiens2.records.results`: ``make_record`` (the only writer), ``write_record``,
  ``read_record``, ``load_records``;
- :mod:`sapiens2.records.provenance`: what made a record (source state, versions, device, dataset hash);
- :mod:`sapiens2.records.view`: ``RecordView``, the typed read side every reader uses.
"""

from sapiens2.records.results import (
    RecordError,
    UnusableResultsError,
    load_records,
    make_record,
    read_record,
    write_record,
)
from sapiens2.records.schema import SCHEMA_ID, SCHEMA_VERSION, validate
from sapiens2.records.view import RecordView, protocol_key, record_views

__all__ = ["SCHEMA_ID", "SCHEMA_VERSION", "RecordError", "RecordView", "UnusableResultsError", "load_records",
           "make_record", "protocol_key", "read_record", "record_views", "validate", "write_record"]
