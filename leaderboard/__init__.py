"""Leaderboard reports from result records, and the paper's reported numbers.

``leaderboard.results``: ``make_record``, ``write_record``, ``read_record``, ``load_records`` (re-exported
from :mod:`sapiens2.records`, which holds the record format and its typed view ``RecordView``).
``leaderboard.paper``: ``load_paper_results`` (the paper's numbers in our metric names and units).
``leaderboard.build``: ``build_site`` (Markdown + self-contained HTML from Jinja2 templates + figures).
"""

from sapiens2.records.results import RecordError, load_records, make_record, read_record, write_record
from sapiens2.records.schema import SCHEMA_VERSION

__all__ = ["RecordError", "SCHEMA_VERSION", "load_records", "make_record", "read_record", "write_record"]
