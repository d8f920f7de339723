"""Pointmap normal metrics: what NaN outside the mask changes (and what the docs say about it), and why
an exact prediction scores above 0 deg (the official ``c / (|c| + 1e-6)`` normals, recomputed here)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from evaluators.dense_common import dilate
from evaluators.filters import sobel5
from evaluators.pointmap import PointmapEvaluator

ROOT = Path(__file__).resolve().parents[2]
H, W = 64, 48


def _scene():
    v, u = torch.meshgrid(torch.arange(float(H)), torch.arange(float(W)), indexing="ij")
    z = 1.0 + 0.1 * torch.sin(u / 7) + 0.05 * torch.cos(v / 5)
    points = torch.stack([(u - W / 2) * z / 500.0, (v - H / 2) * z / 500.0, z])[None].double()
    mask = torch.zeros(1, H, W, dtype=torch.bool)
    mask[:, 8:56, 8:40] = True
    return points, mask


def _filled(points, mask, value):
    out = points.clone()
    out[:, :, ~mask[0]] = value
    return out


def _score(pred, gt, mask):
    ev = PointmapEvaluator()
    ev.update(pred, gt, mask)
    return ev.compute()


def test_an_exact_prediction_scores_the_documented_acos_of_short_normals():
    points, mask = _scene()
    gt = _filled(points, mask, 0.0)
    got = _score(gt.clone(), gt, mask)["normal_mae"]
    dx, dy = sobel5(gt)
    c = torch.linalg.cross(dx[0], dy[0], dim=0)  # 3 x H x W cross products of the Sobel derivatives
    length = c.norm(dim=0) / (c.norm(dim=0) + 1e-6)  # |c / (|c| + 1e-6)| < 1
    want = torch.rad2deg(torch.acos((length**2).clamp(-1, 1)))[mask[0]].mean().item()
    assert got > 0.1 and got == pytest.approx(want, rel=1e-6)
    e = 1e-6 / (c.norm(dim=0) + 1e-6)
    approx = torch.rad2deg(2 * e.sqrt())[mask[0]].mean().item()  # the docs' small-angle form
    assert approx == pytest.approx(want, rel=0.05)


def test_nan_outside_the_mask_changes_only_the_normal_metrics_and_the_docs_say_so():
    points, mask = _scene()
    zero, nan = _filled(points, mask, 0.0), _filled(points, mask, float("nan"))
    rz, rn = _score(zero.clone(), zero, mask), _score(zero.clone(), nan, mask)
    for k in ("l2_mean", "rmse", "scale_aligned.l2_mean", "rel_point_err", "num_pixels"):
        assert rz[k] == rn[k], k
    assert rn["nonfinite_gt_pixels"] == 0.0
    assert rz["normal_mae"] != rn["normal_mae"]  # different pixels: the border ones leave with NaN
    inner = mask & ~dilate(~mask, 5)  # mask pixels farther than 2 px from the outside
    assert rn["normal_mae"] == pytest.approx(_score(zero.clone(), zero, inner)["normal_mae"], rel=1e-9)
    assert round(rz["normal_mae"], 3) == 0.176 and round(rn["normal_mae"], 3) == 0.208  # quoted in the docs
    doc = " ".join((ROOT / "docs" / "evaluators.md").read_text().split())
    assert "changes nothing" not in doc and "changes none of the point metrics" in doc
    assert "0.176 deg zero-outside, 0.208 deg NaN-outside" in doc
    assert math.isfinite(rn["normal_mae"])
