"""Runner of golden-set parity cases; handlers live next to the code they check."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sapiens2.utils_io import read_json


@dataclass
class CaseResult:
    """Outcome of one golden case.

    Attributes:
        name: case name from the manifest.
        kind: case kind (model, metric, codec).
        passed: whether every output is within tolerance.
        max_abs_err: the largest error over the case's outputs (NaN if not run).
        tolerance: the bound the error was compared with (``None`` when per-key rules apply).
        errors: per-output (or per-metric) error.
        message: why a case failed or was not supported.
        seconds: wall time of the case.
    """

    name: str
    kind: str
    passed: bool
    max_abs_err: float = float("nan")
    tolerance: float | None = None
    errors: dict[str, float] = field(default_factory=dict)
    message: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def golden_set_dirs(root: str | Path) -> list[Path]:
    """``[root]`` when it holds ``manifest.json``, else its sub-folders that do (sorted by name).

    Raises:
        FileNotFoundError: naming ``root`` when neither it nor a sub-folder has a manifest.
    """
    root = Path(root)
    if (root / "manifest.json").is_file():
        return [root]
    subs = sorted(p.parent for p in root.glob("*/manifest.json")) if root.is_dir() else []
    if not subs:
        raise FileNotFoundError(f"{root}: no manifest.json in it or in any of its sub-folders")
    return subs


# A handler takes (case: dict, root: Path, manifest: dict) and returns a CaseResult.
CaseHandler = Callable[[dict, Path, dict], CaseResult]


def run_golden_set(
    root: str | Path,
    handlers: dict[str, CaseHandler],
    only: list[str] | None = None,
    verbose: bool = False,
) -> list[CaseResult]:
    """Run every case of ``root/manifest.json``.

    Args:
        root: folder holding ``manifest.json`` and the case files.
        handlers: case kind -> handler; the layer that owns the checked code passes its own
            (models: :func:`sapiens2.models.parity.run_model_case`; metrics: ``evaluators.parity``).
        only: optional list of case names to run.
        verbose: print a traceback when a handler raises.

    Returns:
        One :class:`CaseResult` per manifest case, in manifest order.
    """
    root = Path(root)
    manifest = read_json(root / "manifest.json")
    cases = manifest.get("cases")
    if not isinstance(cases, list):
        raise ValueError(f"{root / 'manifest.json'}: expected a 'cases' list")
    results = []
    for i, case in enumerate(cases):
        name = case.get("name", f"case{i}")
        if only and name not in only:
            continue
        kind = case.get("kind", "?")
        fn = handlers.get(kind)
        t0 = time.perf_counter()
        if fn is None:
            res = CaseResult(name=name, kind=kind, passed=False, message=f"no handler for case kind {kind!r}")
        else:
            try:
                res = fn(case, root, manifest)
            except Exception as e:  # a broken case must show up as a failure, not stop the run
                if verbose:
                    traceback.print_exc()
                res = CaseResult(name=name, kind=kind, passed=False, message=f"{type(e).__name__}: {e}")
        res.seconds = time.perf_counter() - t0
        results.append(res)
    return results
