"""The top-down crop's affine helpers: the closed-form inverse against NumPy's, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from sapiens2.datasets.pose import apply_affine, invert_affine, udp_affine


def test_closed_form_inverse_equals_numpy_inverse():
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(2, 3)) for _ in range(50)]
    mats.append(udp_affine(np.array([300.0, 200.0]), np.array([192.0, 256.0]), (768, 1024)))
    for m in mats:
        ref = np.linalg.inv(np.vstack([m, [0.0, 0.0, 1.0]]))[:2]
        assert np.allclose(invert_affine(m), ref, rtol=1e-12, atol=1e-12)
        pts = rng.normal(size=(7, 2)) * 100
        assert np.allclose(apply_affine(apply_affine(pts, m), invert_affine(m)), pts, atol=1e-9)


def test_singular_affine_is_an_error_naming_it():
    with pytest.raises(ValueError, match="not invertible"):
        invert_affine(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0]]))
