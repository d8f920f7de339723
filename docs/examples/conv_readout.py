"""A third read-out for the probe: the closed-form linear shortcut plus one trained 1x1 conv.

Copy this file, rename the class and ``name``, and change ``build_layers``. Importing the file
registers the read-out; a task uses it when the protocol says ``tasks.<task>.decoder = "<name>"``.
"""

from __future__ import annotations

from torch import nn

from benchmarks.probe.readout.base import ProbeReadout, register_readout


@register_readout
class Conv1x1Readout(ProbeReadout):
    """One trained 1x1 conv on the features, added to the closed-form linear shortcut."""

    # The name a protocol's ``tasks.<task>.decoder`` uses; also part of every protocol id it serves.
    name = "conv1x1"
    # Written into each record's protocol description.
    description = "frozen backbone + linear probe + one trained 1x1 conv"
    # The protocol groups this read-out reads: its tasks' ids hash exactly these (``body`` holds the
    # training knobs: learning rate, iterations, batch size, ...).
    protocol_groups = ("readout", "body")
    # True: the probe spills the train split to disk and trains the layers below on it.
    trains = True

    @classmethod
    def build_layers(cls, shape, protocol):
        """The trained layers: a body (here none) and a head from ``in_channels`` to ``out_channels``."""
        return nn.Identity(), nn.Conv2d(shape.in_channels, shape.out_channels, kernel_size=1)

    @classmethod
    def notes(cls, info):
        """The sentence each record's ``notes`` carries about what this read-out did."""
        loss = info["final_loss"]
        return f"one 1x1 conv trained on the linear probe's residual; final train loss {loss:.3g}"
