"""The ``sapiens2-bench`` command line."""
