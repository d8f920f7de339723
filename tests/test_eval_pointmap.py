"""Pointmap evaluator: golden parity, Sobel normals vs OpenCV, alignment, NaN, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.pointmap import PointmapEvaluator, pointmap_normals, sobel5


def _case(seed=0, b=2, h=16, w=12):
    g = torch.Generator().manual_seed(seed)
    gt = torch.randn(b, 3, h, w, generator=g) * 0.1 + torch.tensor([0.0, 0.0, 2.0]).view(1, 3, 1, 1)
    mask = torch.rand(b, h, w, generator=g) > 0.2
    return gt, mask


def test_golden_pointmap_cases(golden_metric_results):
    for res in golden_metric_results("pointmap"):
        assert res.passed, res.message


def test_sobel_matches_opencv():
    cv2 = pytest.importorskip("cv2")
    x = torch.randn(1, 3, 13, 9, dtype=torch.float64)
    dx, dy = sobel5(x)
    for c in range(3):
        img = x[0, c].numpy()
        ref_x = cv2.Sobel(img, cv2.CV_64F, 1, 0, ksize=5, borderType=cv2.BORDER_REFLECT_101)
        ref_y = cv2.Sobel(img, cv2.CV_64F, 0, 1, ksize=5, borderType=cv2.BORDER_REFLECT_101)
        assert np.abs(dx[0, c].numpy() - ref_x).max() < 1e-10
        assert np.abs(dy[0, c].numpy() - ref_y).max() < 1e-10
    # default border of cv2.Sobel is reflect-101 too
    assert np.abs(dx[0, 0].numpy() - cv2.Sobel(x[0, 0].numpy(), cv2.CV_64F, 1, 0, ksize=5)).max() < 1e-10


def test_normals_of_a_plane():
    v, u = torch.meshgrid(torch.arange(8.0), torch.arange(10.0), indexing="ij")
    plane = torch.stack([u, v, 0.5 * u + 2])[None]  # z = 0.5 x + 2
    n = pointmap_normals(plane)[0, :, 4, 5]
    expected = torch.tensor([-0.5, 0.0, 1.0]) / math.sqrt(1.25)
    assert torch.allclose(n, expected, atol=1e-5)


def _smooth_surface(b=2, h=16, w=12):
    v, u = torch.meshgrid(torch.linspace(-0.3, 0.3, h), torch.linspace(-0.2, 0.2, w), indexing="ij")
    z = 2.0 + 0.5 * (u**2 + v**2)
    gt = torch.stack([u, v, z])[None].repeat(b, 1, 1, 1)
    gt[1] *= 1.3
    _, mask = _case()
    # reflect-101 borders make the derivative across the first/last row/column vanish: degenerate normals
    # there (also in the official evaluator), so score the interior only
    mask[:, :2] = mask[:, -2:] = mask[:, :, :2] = mask[:, :, -2:] = False
    return gt, mask


def test_alignment_recovers_scale_and_shift():
    gt, mask = _smooth_surface()
    shift = torch.tensor([0.3, -0.2, 0.5]).view(1, 3, 1, 1)
    ev = PointmapEvaluator()
    ev.update(0.5 * gt, gt, mask)
    r = ev.compute()
    assert r["l2_mean"] > 0.5 and r["scale_aligned.l2_mean"] < 1e-6
    assert r["delta_1.25"] == 0.0 and r["scale_aligned.delta_1.25"] == 1.0
    assert r["normal_mae"] < 0.1  # scale-invariant up to float32 acos resolution near 0 deg (~0.02 deg)
    ev.reset()
    ev.update(0.5 * gt + shift, gt, mask)
    r = ev.compute()
    assert r["scale_aligned.l2_mean"] > 1e-3 and r["scale_shift_aligned.l2_mean"] < 1e-6
    assert r["scale_shift_aligned.rel_point_err"] < 1e-6
    assert "alignment_solver" in r["conventions"]


def test_metrics_against_direct_computation():
    gt, mask = _case(2)
    pred = gt + 0.05 * torch.randn_like(gt)
    ev = PointmapEvaluator()
    ev.update(pred, gt, mask)
    r = ev.compute()
    d = (pred - gt).permute(0, 2, 3, 1)[mask].double()
    l2 = d.norm(dim=1)
    assert abs(r["l2_mean"] - l2.mean().item()) < 1e-9
    assert abs(r["rmse"] - l2.pow(2).mean().sqrt().item()) < 1e-9
    assert abs(r["z_mae"] - d[:, 2].abs().mean().item()) < 1e-9
    assert abs(r["within_05_cm"] - (l2 < 0.05).double().mean().item()) < 1e-12
    g = gt.permute(0, 2, 3, 1)[mask].double()
    assert abs(r["rel_point_err"] - (l2 / g.norm(dim=1)).mean().item()) < 1e-9


def test_nonfinite_and_bad_inputs():
    gt, mask = _case(3)
    pred = gt.clone()
    pred[0, :, 5, 5] = float("nan")
    ev = PointmapEvaluator()
    ev.update(pred, gt, mask)
    r = ev.compute()
    assert r["nonfinite_pred_pixels"] == float(mask[0, 5, 5])
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
    with pytest.raises(ValueError, match="pred_pointmap"):
        ev.update(pred[:, :2], gt, mask)
    with pytest.raises(ValueError, match="mask"):
        ev.update(pred, gt, torch.zeros_like(mask))
    with pytest.raises(ValueError, match="gt_pointmap"):
        ev.update(pred, gt.long(), mask)
