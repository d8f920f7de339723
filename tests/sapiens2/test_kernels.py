"""The kernel key: bit-for-bit comparisons only where every kernel-choosing component is the same."""

from __future__ import annotations

import numpy as np
import torch

from sapiens2.kernels import KERNEL_FIELDS, kernel_key, kernel_mismatch
from sapiens2.weights import SHIPPED, model_card


def test_the_key_names_numpy_its_blas_and_torch_build():
    key = kernel_key()
    assert tuple(key) == KERNEL_FIELDS
    assert key["numpy_version"] == np.__version__ and key["torch"] == torch.__version__
    assert key["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert key["numpy_blas"] and key["numpy_blas"] != "?"
    assert kernel_mismatch(key) is None  # this process against itself


def test_each_differing_field_is_named():
    key = kernel_key()
    for field in KERNEL_FIELDS:
        other = {**key, field: "something else"}
        why = kernel_mismatch(other, key)
        assert why is not None and why.startswith(f"{field} 'something else' there"), why


def test_a_card_without_the_full_key_is_never_the_same_machine():
    """The shipped cards record CPU model and torch version only: NumPy, BLAS and torch's build are unknown,
    so their first steps are compared to the documented tolerance, not bit for bit."""
    for name in sorted(SHIPPED):
        timing = model_card(name)["timing"]
        # even on a machine whose CPU model and torch version are the card's
        here = {**kernel_key(), "cpu_model": timing["cpu_model"], "torch": timing["torch"]}
        assert "the recorded key lacks" in kernel_mismatch(timing.get("kernels"), here)
