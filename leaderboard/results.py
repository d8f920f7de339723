"""Result records (a re-export): the record format lives in :mod:`sapiens2.records`, below every reader
and producer; ``leaderboard.results`` keeps its public names for existing callers."""

from sapiens2.records.results import (  # noqa: F401
    RESULT_SUFFIX,
    RecordError,
    UnusableResultsError,
    __all__,  # noqa: F401
    dataset_content_hash,
    device_info,
    find_result_files,
    flatten_metrics,
    load_records,
    make_record,
    provenance,
    read_record,
    write_record,
)
