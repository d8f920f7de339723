"""Result records (versioned schema), the paper's reported numbers, and leaderboard reports.

``leaderboard.results``: ``make_record``, ``write_record``, ``read_record``, ``load_records``.
``leaderboard.paper``: ``load_paper_results`` (the paper's numbers in our metric names and units).
``leaderboard.build``: ``build_site`` (Markdown + self-contained HTML from Jinja2 templates + figures).
"""

from leaderboard.results import RecordError, load_records, make_record, read_record, write_record
from leaderboard.schema import SCHEMA_VERSION

__all__ = ["RecordError", "SCHEMA_VERSION", "load_records", "make_record", "read_record", "write_record"]
