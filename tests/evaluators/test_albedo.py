"""Albedo evaluator: golden parity, SSIM vs scikit-image, data range, NaN, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.albedo import AlbedoEvaluator, masked_ssim_map


def _case(seed=0, b=2, h=24, w=20):
    g = torch.Generator().manual_seed(seed)
    gt = torch.rand(b, 3, h, w, generator=g)
    pred = (gt + 0.1 * torch.randn(b, 3, h, w, generator=g)).clamp(0, 1)
    mask = torch.rand(b, h, w, generator=g) > 0.1
    return pred, gt, mask


def test_golden_albedo_cases(golden_metric_results):
    for res in golden_metric_results("albedo"):
        assert res.passed, res.message


def test_ssim_with_full_mask_matches_skimage_inside_the_border():
    from skimage import metrics  # the test extra

    pred, gt, _ = _case(1, b=1)
    full = torch.ones(1, 24, 20, dtype=torch.bool)
    ours, _ = masked_ssim_map(pred, gt, full, 1.0)
    for c in range(3):
        _, ref = metrics.structural_similarity(
            pred[0, c].double().numpy(),
            gt[0, c].double().numpy(),
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=1.0,
            full=True,
        )
        # away from the 5-px border the window is all inside the image: same definition exactly
        assert np.abs(ours[0, c, 5:-5, 5:-5].numpy() - ref[5:-5, 5:-5]).max() < 1e-6


def test_metrics_against_direct_computation_and_range_255():
    pred, gt, mask = _case(2)
    ev = AlbedoEvaluator()
    ev.update(pred, gt, mask)
    r = ev.compute()
    d = (pred - gt).permute(0, 2, 3, 1)[mask].double()
    assert abs(r["mae"] - d.abs().mean().item()) < 1e-9
    mse = d.pow(2).mean().item()
    assert abs(r["psnr"] - 10 * math.log10(1 / mse)) < 1e-9
    ev255 = AlbedoEvaluator()
    ev255.update(pred * 255, gt * 255, mask)
    r255 = ev255.compute()
    assert r255["data_range"] == 255.0
    assert abs(r255["psnr"] - r["psnr"]) < 1e-6
    assert abs(r255["ssim"] - r["ssim"]) < 1e-6
    assert abs(r255["mae"] - 255 * r["mae"]) < 1e-6
    ev.update(pred * 255, gt * 255, mask)
    with pytest.raises(ValueError, match="data ranges differ"):
        ev.compute()


def test_grad_l1_uses_pairs_with_both_pixels_valid():
    gt = torch.zeros(1, 1, 1, 4)
    pred = torch.tensor([0.0, 1.0, 0.0, 5.0]).view(1, 1, 1, 4)
    mask = torch.tensor([[[True, True, True, False]]])
    ev = AlbedoEvaluator()
    ev.update(pred, gt, mask)
    assert ev.compute()["grad_l1"] == pytest.approx(1.0)  # pairs (0,1), (1,2); (2,3) has an invalid pixel


def test_nonfinite_and_bad_inputs():
    pred, gt, mask = _case(3)
    bad = pred.clone()
    bad[0, 1, 2, 2] = float("inf")
    ev = AlbedoEvaluator()
    ev.update(bad, gt, mask)
    r = ev.compute()
    assert r["nonfinite_pred_pixels"] == float(mask[0, 2, 2])
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
    with pytest.raises(ValueError, match="pred_albedo"):
        ev.update(pred[:, :1], gt, mask)
    with pytest.raises(ValueError, match="gt_albedo: every mask pixel has a non-finite GT value"):
        ev.update(pred, torch.full_like(gt, float("nan")), mask)
    with pytest.raises(ValueError, match="mask"):
        ev.update(pred, gt, mask[None])
    with pytest.raises(ValueError, match="data_range"):
        AlbedoEvaluator(data_range=-1)


def test_nonfinite_gt_is_left_out_and_nonfinite_pred_is_a_failure():
    pred, gt, mask = _case(4)
    mask[:] = True
    gt_nan = gt.clone()
    gt_nan[0, :, 0, :3] = float("nan")  # three invalid GT pixels: used to be an error
    ev = AlbedoEvaluator()
    ev.update(pred, gt_nan, mask)
    r = ev.compute()
    assert r["nonfinite_gt_pixels"] == 3.0 and r["num_pixels"] == mask.sum().item() - 3
    up = torch.nn.functional.interpolate(pred, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    keep = mask.clone()
    keep[0, 0, :3] = False
    d = (up - gt).permute(0, 2, 3, 1)[keep].double()
    assert r["mae"] == pytest.approx(d.abs().mean().item(), rel=1e-9)
    # a NaN prediction is scored as the farthest value in [0, 1]: never better than a finite guess
    full = torch.nn.functional.interpolate(pred, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    holes = full.clone()
    holes[:, :, ::2] = float("nan")
    scores = []
    for p in (full, holes):
        e = AlbedoEvaluator()
        e.update(p, gt, mask)
        scores.append(e.compute())
    assert scores[1]["nonfinite_pred_pixels"] == float(mask[:, ::2].sum())
    assert scores[1]["mae"] > scores[0]["mae"] and scores[1]["psnr"] < scores[0]["psnr"]
    worst = torch.where(gt < 0.5, 1.0, 0.0)
    want = (worst - gt)[:, :, ::2].abs().sum() + (full - gt)[:, :, 1::2].abs().sum()
    assert scores[1]["mae"] == pytest.approx(float(want) / gt.numel(), rel=1e-5)


def test_unbatched_channels_last_albedo():
    pred, gt, mask = _case(5)
    ref = AlbedoEvaluator()
    ref.update(pred[:1], gt[:1], mask[:1])
    ev = AlbedoEvaluator()
    ev.update(pred[0].permute(1, 2, 0), gt[0].permute(1, 2, 0), mask[0])  # H x W x 3, one sample
    a, b = ev.compute(), ref.compute()
    for k in ("mae", "rmse", "ssim", "grad_l1"):
        assert a[k] == pytest.approx(b[k], rel=1e-9), k
