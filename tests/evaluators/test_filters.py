"""The fast image filters: OpenCV, SciPy and conv2d paths agree with OpenCV's definitions."""

from __future__ import annotations

import pytest
import torch

from evaluators import filters


@pytest.fixture(params=["native", "scipy", "conv2d"])
def backend(request, monkeypatch):
    if request.param == "scipy":
        monkeypatch.setattr(filters, "cv2", None)
    if request.param == "conv2d":  # the path of CUDA tensors
        monkeypatch.setattr(filters, "_native_ok", lambda x: False)
    return request.param


def test_sobel5_matches_opencv(backend):
    import cv2
    x = torch.randn(2, 3, 13, 11, dtype=torch.float64)
    dx, dy = filters.sobel5(x)
    for b in range(2):
        for c in range(3):
            p = x[b, c].numpy()
            assert abs(dx[b, c].numpy() - cv2.Sobel(p, cv2.CV_64F, 1, 0, ksize=5)).max() < 1e-9
            assert abs(dy[b, c].numpy() - cv2.Sobel(p, cv2.CV_64F, 0, 1, ksize=5)).max() < 1e-9


def test_gaussian_blur_is_zero_padded_separable_filter(backend):
    x = torch.rand(2, 2, 17, 15, dtype=torch.float64)
    g = filters.gaussian_window(11, 1.5)
    k2 = (g[:, None] * g[None])[None, None]
    ref = torch.nn.functional.conv2d(x.reshape(4, 1, 17, 15), k2, padding=5).view_as(x)
    assert (filters.gaussian_blur(x, g) - ref).abs().max() < 1e-12
    with pytest.raises(ValueError, match="H, W >= 3"):
        filters.sobel5(torch.zeros(1, 1, 2, 9))
