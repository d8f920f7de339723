"""Parity with the official implementation on golden sets (``sapiens2-bench parity DIR``).

A golden set is a folder with ``manifest.json`` whose ``cases`` each name a ``kind``
(``model``, ``metric`` or ``codec``). The runner dispatches every case to the handler of its
kind; a handler returns a :class:`CaseResult`. Cases of a kind without a handler, or whose handler
raises, are reported as failed with the reason, never skipped.
"""

from sapiens2.parity.runner import CaseResult, golden_set_dirs, run_golden_set

__all__ = ["CaseResult", "golden_set_dirs", "run_golden_set"]
