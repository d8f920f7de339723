"""The closed-form linear read-out (the headline): the fitted shortcut alone, nothing trained.

A per-position train prior plus one ridge map of the tapped features, fitted on the train split's
streamed sums (:mod:`benchmarks.probe.readout.shortcut`); its protocol id covers the closed-form
fit's knobs (the ``readout`` group) and none of a trained body's.
"""

from __future__ import annotations

import math

from benchmarks.probe.readout.base import ProbeReadout, register_readout


@register_readout
class LinearReadout(ProbeReadout):
    """``decoder="linear"``: the closed-form ridge shortcut, seed-independent."""

    name = "linear"
    description = "frozen backbone + closed-form linear probe"
    protocol_groups = ("readout",)
    trains = False
    needs_shortcut = True

    @classmethod
    def notes(cls, info: dict) -> str:
        """The ridge penalty picked on the held-out train images and that fold's R^2.

        Example:
            >>> LinearReadout.notes({"shortcut": {"alpha": 0.1, "heldout_r2": 0.5, "shuffle": 4}})
            'closed-form linear read-out (ridge on the train features, penalty 0.1 picked on held-out train \
images, held-out R^2 0.5), nothing trained: every seed gives these numbers'
        """
        fit = info.get("shortcut") or {}
        alpha, r2 = fit.get("alpha"), fit.get("heldout_r2")
        if isinstance(alpha, (int, float)):
            penalty = f"penalty {alpha:.4g} picked on held-out train images"
        else:  # an infinite penalty: the features get no weight, the prediction is the train prior
            penalty = f"penalty {alpha}"
        held = f", held-out R^2 {r2:.4g}" if isinstance(r2, (int, float)) and math.isfinite(r2) else ""
        return (f"closed-form linear read-out (ridge on the train features, {penalty}{held}), "
                "nothing trained: every seed gives these numbers")
