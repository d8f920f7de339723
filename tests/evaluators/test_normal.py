"""Normal evaluator: golden parity, medians, NaN/Inf predictions, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.normal import NormalEvaluator, angular_error_deg


def _case(seed=0, b=2, h=16, w=12):
    g = torch.Generator().manual_seed(seed)
    gt = torch.randn(b, 3, h, w, generator=g)
    pred = gt[:, :, ::2, ::2] + 0.6 * torch.randn(b, 3, h // 2, w // 2, generator=g)
    mask = torch.rand(b, h, w, generator=g) > 0.2
    return pred, gt, mask


def test_golden_normal_cases(golden_metric_results):
    for res in golden_metric_results("normal"):
        assert res.passed, res.message


def test_metrics_against_direct_numpy_computation():
    pred, gt, mask = _case()
    ev = NormalEvaluator()
    ev.update(pred[:1], gt[:1], mask[:1], index=[0])
    ev.update(pred[1:], gt[1:], mask[1:], index=[1])
    r = ev.compute()
    up = torch.nn.functional.interpolate(pred, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    ang = angular_error_deg(up, gt)[mask].double().numpy()
    assert abs(r["normal_mae"] - ang.mean()) < 1e-9
    assert abs(r["normal_rmse"] - math.sqrt((ang**2).mean())) < 1e-9
    assert abs(r["within_11_25_deg"] - 100 * (ang < 11.25).mean()) < 1e-9
    # official histogram median: centre of the first 0.5-deg bin reaching half the pixels
    hist, edges = np.histogram(ang, bins=360, range=(0, 180))
    i = int(np.searchsorted(np.cumsum(hist), ang.size / 2.0))
    assert r["normal_median_deg"] == pytest.approx((edges[i] + edges[i + 1]) / 2)
    # the exact median key is within the documented 0.0005-deg quantisation of np.median
    assert abs(r["normal_median_exact_deg"] - np.median(ang)) <= 5e-4 + 1e-9
    assert r["num_pixels"] == mask.sum().item()


def test_exact_median_even_and_odd_counts():
    gt = torch.zeros(1, 3, 1, 4)
    gt[:, 2] = 1
    angles = torch.tensor([10.0, 20.0, 30.0, 40.0])
    pred = torch.stack([torch.sin(torch.deg2rad(angles)), torch.zeros(4), torch.cos(torch.deg2rad(angles))])[
        None, :, None
    ]
    ev = NormalEvaluator()
    ev.update(pred, gt, torch.ones(1, 1, 4, dtype=torch.bool))
    assert ev.compute()["normal_median_exact_deg"] == pytest.approx(25.0, abs=5e-4)
    ev.reset()
    ev.update(pred[..., :3], gt[..., :3], torch.ones(1, 1, 3, dtype=torch.bool))
    assert ev.compute()["normal_median_exact_deg"] == pytest.approx(20.0, abs=5e-4)


def test_nonfinite_predictions_are_failures_and_counted():
    """A NaN/Inf predicted pixel is scored as a 180-degree error: it never improves a score."""
    pred, gt, mask = _case(1)
    pred = torch.nn.functional.interpolate(pred, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    mask[:] = True
    ref = NormalEvaluator()
    ref.update(pred, gt, mask)
    want = ref.compute()
    bad = pred.clone()
    bad[0, 0, 0, 0] = float("nan")
    bad[1, 2, 3, 3] = float("inf")
    ev = NormalEvaluator()
    ev.update(bad, gt, mask)
    r = ev.compute()
    assert r["nonfinite_pred_pixels"] == 2.0
    assert all(math.isfinite(v) for k, v in r.items() if isinstance(v, float))
    assert r["num_pixels"] == want["num_pixels"]
    a = angular_error_deg(pred, gt)
    a[0, 0, 0] = a[1, 3, 3] = 180.0
    assert r["normal_mae"] == pytest.approx(float(a.double().mean()), rel=1e-6)
    assert r["normal_mae"] > want["normal_mae"] and r["within_30_0_deg"] <= want["within_30_0_deg"]
    all_bad = NormalEvaluator()
    all_bad.update(torch.full_like(pred, float("nan")), gt, mask)
    r = all_bad.compute()
    assert r["normal_mae"] == 180.0 and r["within_30_0_deg"] == 0.0
    assert r["nonfinite_pred_pixels"] == r["num_pixels"]


def test_nonfinite_gt_leaves_the_mask_and_is_counted():
    """NaN GT inside the mask used to give a 90-degree-wrong prediction an exact median of 0."""
    pred, gt, mask = _case(2)
    mask[:] = True
    wrong = torch.zeros_like(gt)
    wrong[:, 0] = 1.0
    gt = torch.zeros_like(gt)
    gt[:, 2] = 1.0  # every prediction is 90 degrees off
    gt[0, :, :2] = float("nan")  # two rows of invalid GT inside the mask
    ev = NormalEvaluator()
    ev.update(wrong, gt, mask)
    r = ev.compute()
    assert r["nonfinite_gt_pixels"] == 2 * gt.shape[-1]
    assert r["num_pixels"] == mask.sum().item() - r["nonfinite_gt_pixels"]
    assert r["normal_median_exact_deg"] == pytest.approx(90.0, abs=1e-3)
    assert r["normal_mae"] == pytest.approx(90.0, abs=1e-3)


def test_unbatched_and_channels_last_inputs():
    pred, gt, mask = _case(3)
    ref = NormalEvaluator()
    ref.update(pred[:1], gt[:1], mask[:1])
    for p, g, m in (
        (pred[0], gt[0], mask[0]),  # 3 x H x W, one sample
        (pred[0].permute(1, 2, 0), gt[0].permute(1, 2, 0), mask[0]),  # H x W x 3, one sample
        (pred[:1].permute(0, 2, 3, 1), gt[:1].permute(0, 2, 3, 1), mask[:1]),  # B x H x W x 3
    ):
        ev = NormalEvaluator()
        ev.update(p, g, m)
        assert ev.compute()["normal_mae"] == pytest.approx(ref.compute()["normal_mae"], abs=1e-9)
    with pytest.raises(ValueError, match=r"gt_normal: expected .*one sample: 3 x H x W or H x W x 3"):
        NormalEvaluator().update(pred[0, :2], gt[0, :2], mask[0])


def test_bad_inputs_name_the_tensor():
    pred, gt, mask = _case()
    ev = NormalEvaluator()
    with pytest.raises(ValueError, match="pred_normal"):
        ev.update(pred[:, :2], gt, mask)
    with pytest.raises(ValueError, match="gt_normal"):
        ev.update(pred, gt[0], mask)
    with pytest.raises(ValueError, match="mask"):
        ev.update(pred, gt, mask[:, :4])
    with pytest.raises(ValueError, match="batch size"):
        ev.update(pred[:1], gt, mask)
    empty = mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match=r"mask: empty mask .*\[1\]"):
        ev.update(pred, gt, empty)
    ok = NormalEvaluator(allow_empty_masks=True)
    ok.update(pred, gt, empty)
    assert ok.compute()["num_pixels"] == mask[0].sum().item()
    with pytest.raises(TypeError, match="pred_normal"):
        ev.update([1, 2], gt, mask)
