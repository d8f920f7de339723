"""Read-outs are plug-ins: a third one is one class, registered from here, and runs through ``run_probe``.

The toy read-out trains a single 1x1 conv on the closed-form shortcut's residual. It declares the
protocol groups it reads, so its tasks' ids cover exactly them, and it builds its decoder; nothing
else in the probe names it. The nested protocol config keeps the ids the flat one had.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from _probe_toy import make_toy_data  # noqa: E402
from torch import nn

from benchmarks.probe.api import run_probe  # noqa: E402
from benchmarks.probe.config import GROUPS, BodyConfig  # noqa: E402
from benchmarks.probe.protocol import ProbeProtocol, body_protocol, default_protocol, quick_protocol  # noqa: E402
from benchmarks.probe.readout.base import (  # noqa: E402
    ProbeReadout,
    get_readout,
    readout_names,
    register_readout,
    unregister_readout,
)
from sapiens2.errors import UnknownNameError  # noqa: E402


class ToyConvReadout(ProbeReadout):
    """One trained 1x1 conv at the features' stride (upsampled to the output by the decoder)."""

    name = "toy-conv1x1"
    description = "frozen backbone + linear probe + one trained 1x1 conv"
    protocol_groups = ("readout", "body")
    trains = True

    @classmethod
    def build_layers(cls, shape, protocol):
        return nn.Identity(), nn.Conv2d(shape.in_channels, shape.out_channels, 1)

    @classmethod
    def notes(cls, info):
        return f"toy conv trained for {info['final_loss']:.3g}"


class ToyClosedFormReadout(ProbeReadout):
    """Nothing trained and only the closed-form group read: its ids leave the body's knobs out."""

    name = "toy-closed"
    description = "toy closed form"
    protocol_groups = ("readout",)


@pytest.fixture
def toy_readouts():
    for cls in (ToyConvReadout, ToyClosedFormReadout):
        register_readout(cls)
    yield
    for cls in (ToyConvReadout, ToyClosedFormReadout):
        unregister_readout(cls.name)


def test_the_shipped_readouts_register_themselves():
    assert readout_names()[:2] == ("linear", "pixelshuffle")
    assert get_readout("linear").protocol_groups == ("readout",) and not get_readout("linear").trains
    assert get_readout("pixelshuffle").protocol_groups == ("readout", "body")
    with pytest.raises(UnknownNameError, match="unknown read-out .* 'mlp'; known: linear, pixelshuffle"):
        get_readout("mlp")
    with pytest.raises(ValueError, match=r"tasks\['seg'\]\.decoder: expected a registered read-out"):
        ProbeProtocol().replace(tasks={"seg": {"decoder": "mlp"}})


def test_a_readout_id_covers_the_groups_it_declares(toy_readouts):
    p = default_protocol().replace(tasks={"seg": {"decoder": "toy-closed"}})
    view = p.task_protocol("seg")
    assert "ridge_alphas" in view and "lr" not in view and "loss" not in view["tasks"]["seg"]
    assert p.replace(lr=0.5).protocol_id("seg") == p.protocol_id("seg")
    assert p.replace(ridge_holdout_every=3).protocol_id("seg") != p.protocol_id("seg")
    # the read-out's name is part of the id: same groups as the linear read-out, another id
    assert p.protocol_id("seg") != default_protocol().protocol_id("seg")
    trained = default_protocol().replace(tasks={"seg": {"decoder": "toy-conv1x1"}})
    view = trained.task_protocol("seg")
    assert view["lr"] == 1e-3 and "loss" in view["tasks"]["seg"]


def test_a_registered_readout_runs_through_run_probe(toy_readouts, tmp_path):
    protocol = quick_protocol().replace(iterations=4, tasks={"albedo": {"decoder": "toy-conv1x1"}})
    data = make_toy_data(n_train=6, n_test=3, tasks=("albedo",))
    paths = run_probe("pixels", ["albedo"], data, tmp_path, protocol=protocol)
    rec = json.loads(paths[0].read_text())
    assert rec["protocol"]["description"].startswith("frozen backbone + linear probe + one trained 1x1 conv")
    assert rec["protocol"]["protocol_id"] == protocol.protocol_id("albedo")
    assert rec["notes"].startswith("toy conv trained for ") and rec["config"]["protocol"]["iterations"] == 4
    assert rec["timings"]["train_s"] > 0  # the trained path ran: the train split spilled, a decoder trained


def test_nested_groups_and_flat_names_are_one_config():
    p = quick_protocol()
    assert p.lr is p.body.lr and p.input_size == p.input.input_size == (64, 48)
    flat = p.to_dict()
    assert "body" not in flat and flat["decoder_channels"] == 16
    assert ProbeProtocol.from_dict(flat) == p
    nested = {"version": 5, "tasks": flat["tasks"], "input": {"input_size": [64, 48]},
              **{g: {k: flat[k] for k in (f.name for f in dataclasses.fields(cls))}
                 for g, cls in GROUPS.items() if g != "input"}}
    assert ProbeProtocol.from_dict(nested) == p
    assert p.replace(body={"lr": 0.5}).body == BodyConfig(**{**flat_body(p), "lr": 0.5})
    with pytest.raises(UnknownNameError, match="unknown probe protocol key 'learning_rate'"):
        p.replace(learning_rate=0.1)
    with pytest.raises(ValueError, match=r"protocol\.lr: expected a finite number, got 'fast'"):
        p.replace(lr="fast")


def flat_body(p):
    return {f.name: getattr(p.body, f.name) for f in dataclasses.fields(BodyConfig)}


@pytest.mark.parametrize("make", [default_protocol, body_protocol, quick_protocol])
def test_every_id_is_the_hash_of_its_flat_view(make):
    """The nested config hashes the same flat view a record stores (so the ids did not move)."""
    from sapiens2.records.integrity import protocol_id

    p = make()
    for task in p.tasks:
        view = p.task_protocol(task)
        assert not set(view) & set(GROUPS)
        assert p.protocol_id(task) == protocol_id("probe", 5, view)
        assert ProbeProtocol.from_dict(view).task_protocol(task) == view
