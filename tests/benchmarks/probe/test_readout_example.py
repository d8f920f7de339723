"""The read-out walkthrough's template (docs/examples/conv_readout.py) registers and runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from _probe_toy import make_toy_data

from benchmarks.probe.api import run_probe
from benchmarks.probe.protocol import default_protocol, quick_protocol
from benchmarks.probe.readout.base import get_readout, unregister_readout

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "conv_readout.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("conv_readout_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_template_registers_and_runs_through_run_probe(tmp_path):
    module = _load_example()
    try:
        assert get_readout("conv1x1") is module.Conv1x1Readout
        linear = default_protocol()
        mine = linear.replace(tasks={"albedo": {"decoder": "conv1x1"}})
        assert mine.protocol_id("albedo") != linear.protocol_id("albedo")
        assert mine.replace(lr=0.5).protocol_id("albedo") != mine.protocol_id("albedo")  # it reads `body`
        protocol = quick_protocol().replace(iterations=3, tasks={"albedo": {"decoder": "conv1x1"}})
        data = make_toy_data(n_train=6, n_test=3, tasks=("albedo",))
        rec = json.loads(run_probe("pixels", ["albedo"], data, tmp_path, protocol=protocol)[0].read_text())
        assert rec["protocol"]["description"].startswith(module.Conv1x1Readout.description)
        assert rec["notes"].startswith("one 1x1 conv trained on the linear probe's residual")
        assert rec["protocol"]["protocol_id"] == protocol.protocol_id("albedo")
    finally:
        unregister_readout("conv1x1")


def test_the_walkthrough_table_names_the_readout_fields():
    """Every field the walkthrough's table explains is a class attribute of ``ProbeReadout``."""
    from benchmarks.probe.readout.base import ProbeReadout

    text = (ROOT / "docs" / "adding_a_readout.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    fields = [row.split("`")[1] for row in rows]
    assert fields == ["name", "protocol_groups", "trains"]
    assert all(hasattr(ProbeReadout, f) for f in fields)
