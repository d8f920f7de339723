"""sapiens2-bench: reference models, evaluators and benchmarks for Sapiens2."""

__version__ = "0.1.0"
