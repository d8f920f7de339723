"""``reproduce table1``: the model card, written under ``OUT/table1/`` and reused while its inputs hold.

The card depends only on the reference data (``official_archs.json``, the printed values), the code
that builds and counts the backbones, and the torch version (its FLOP counter). Their fingerprint is
stored with the card; a later run with the same fingerprint prints the stored card instead of
recomputing it, and says why when it does recompute (no card yet, an unreadable card, changed inputs,
``--force``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.reproduce import model_card
from benchmarks.reproduce.model_card import CARD_UNITS, card_text
from sapiens2.models.flops import CARD_CONVENTION
from sapiens2.utils_io import write_json_atomic

CARD_FILE = "model_card.json"
# Package files the card is computed from (relative to the repository root).
_SOURCES = (
    "sapiens2/data/official_archs.json",
    "sapiens2/models/flops.py",
    "sapiens2/models/builder.py",
    "sapiens2/models/backbones/common.py",
    "sapiens2/models/backbones/sapiens2.py",
    "sapiens2/models/backbones/sapiens2_layers.py",
    "benchmarks/cli/model_card.py",
)


def inputs_fingerprint() -> dict:
    """``{"torch": version, "files": {path: sha256}, "sha256": digest of both}`` of the card's inputs."""
    import torch

    root = Path(__file__).resolve().parents[2]
    files = {}
    for rel in _SOURCES:
        path = root / rel
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"
    blob = json.dumps({"torch": torch.__version__, "files": files}, sort_keys=True)
    return {"torch": torch.__version__, "files": files, "sha256": hashlib.sha256(blob.encode()).hexdigest()}


def _stale_reason(stored: dict | None, current: dict) -> str | None:
    """Why a stored card cannot be reused (None: it can)."""
    if stored is None:
        return "no stored card"
    old = stored.get("inputs") or {}
    if old.get("sha256") == current["sha256"]:
        return None
    if old.get("torch") != current["torch"]:
        return f"torch changed ({old.get('torch')} -> {current['torch']})"
    changed = sorted(k for k in current["files"] if (old.get("files") or {}).get(k) != current["files"][k])
    return "inputs changed: " + (", ".join(changed) or "fingerprint differs")


def _read(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("no 'rows' list")
        return data, None
    except (OSError, ValueError) as e:
        return None, f"stored card {path} unreadable ({e})"


def reproduce_table1(out_dir, json_path=None, force: bool = False) -> int:
    """Print the model card, reusing ``out_dir/table1/model_card.json`` when its inputs are unchanged.

    Args:
        out_dir: the ``reproduce --out`` folder; the card is written (atomically) to
            ``out_dir/table1/model_card.json`` with the fingerprint of its inputs.
        json_path: also write the card JSON here (the ``--json`` option).
        force: recompute even when the stored card is current.

    Returns:
        The exit code (0).
    """
    import time

    path = Path(out_dir) / "table1" / CARD_FILE
    current = inputs_fingerprint()
    stored, unreadable = _read(path)
    reason = "--force" if force else (unreadable or _stale_reason(stored, current))
    if reason is None:
        rows = stored["rows"]
        print(card_text(rows))
        print(f"\nreused {path} (computed {stored.get('computed_at', '?')}; inputs unchanged, fingerprint "
              f"{current['sha256'][:12]}; --force recomputes)")
    else:
        print(f"computing the model card ({reason})")
        start = time.perf_counter()
        rows = model_card.compute_rows(None)
        seconds = time.perf_counter() - start
        print(card_text(rows))
        card = {"rows": rows, "convention": CARD_CONVENTION, "units": CARD_UNITS, "inputs": current,
                "computed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "compute_seconds": round(seconds, 2)}
        write_json_atomic(path, card)
        print(f"\ncomputed in {seconds:.1f} s on the meta device; wrote {path}")
    if json_path:
        write_json_atomic(json_path, {"rows": rows, "convention": CARD_CONVENTION, "units": CARD_UNITS})
        print(f"wrote {json_path}")
    return 0
