"""Stage 5, records: bootstrap intervals, record writing, run identity, summaries and comparisons."""
