"""Seg evaluator: golden parity, mmseg IoUMetric agreement, NaN logits, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evaluators.seg import PER_CLASS_METRICS, SegEvaluator, seg_labels_from_logits


def _random_case(seed: int, b=3, c=6, h=20, w=16):
    g = torch.Generator().manual_seed(seed)
    gt = torch.randint(0, c - 2, (b, h, w), generator=g)  # class c-2, c-1 never in GT
    gt[torch.rand(b, h, w, generator=g) > 0.85] = 255
    logits = torch.randn(b, c, h // 2, w // 2, generator=g)
    logits[:, c - 1] -= 100  # class c-1 never predicted: absent from both -> NaN
    return logits, gt


@pytest.mark.openmmlab
@pytest.mark.parametrize("nan_to_num", [None, 0.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_mmseg_iou_metric(seed, nan_to_num):
    from mmseg.evaluation.metrics import IoUMetric
    c = 6
    logits, gt = _random_case(seed, c=c)
    ev = SegEvaluator(num_classes=c, nan_to_num=nan_to_num)
    ev.update(logits[:2], gt[:2], index=[0, 1])
    ev.update(logits[2:], gt[2:], index=[2])
    ours = ev.compute()

    labels, _ = seg_labels_from_logits(logits, gt.shape[-2:])
    ref = IoUMetric(ignore_index=255, iou_metrics=["mIoU", "mDice", "mFscore"], nan_to_num=nan_to_num)
    ref.dataset_meta = {"classes": [f"c{i}" for i in range(c)]}
    ref.process(
        {},
        [{"pred_sem_seg": {"data": labels[i][None]}, "gt_sem_seg": {"data": gt[i][None]}} for i in range(3)],
    )
    areas = [sum(r[k] for r in ref.results) for k in range(4)]
    per_class = IoUMetric.total_area_to_metrics(*areas, ["mIoU", "mDice", "mFscore"], nan_to_num, 1)
    assert abs(ours["aAcc"] / 100 - float(per_class["aAcc"])) <= 1e-6
    for k in PER_CLASS_METRICS:
        theirs = np.asarray(per_class[k], dtype=np.float64)
        mine = np.array(list(ours["per_class"][k].values()))
        assert np.array_equal(np.isnan(theirs), np.isnan(mine)), k
        assert np.nanmax(np.abs(theirs - mine)) <= 1e-6, k
        assert abs(ours["m" + k] - np.nanmean(theirs) * 100) <= 1e-6 * 100, k
    summary = ref.compute_metrics(ref.results)
    for k, v in summary.items():
        assert abs(round(ours[k], 2) - float(v)) <= 1e-6, k
    if nan_to_num is None:
        assert math.isnan(ours["per_class"]["IoU"]["5"])  # absent from prediction and GT
    else:
        assert ours["per_class"]["IoU"]["5"] == 0.0


def test_golden_seg_cases(golden_metric_results):
    for res in golden_metric_results("seg"):
        assert res.passed, res.message
        assert res.errors["per_class.IoU"] <= 1e-4


def test_nonfinite_logits_are_counted_as_misses():
    gt = torch.randint(0, 4, (1, 8, 8), generator=torch.Generator().manual_seed(3))
    logits = 10.0 * torch.nn.functional.one_hot(gt, 4).permute(0, 3, 1, 2).float()  # perfect, at GT size
    logits[0, :, 0, :3] = float("nan")
    logits[0, 1, 5, 5] = float("inf")
    ev = SegEvaluator(num_classes=4)
    ev.update(logits, gt)
    r = ev.compute()
    assert r["nonfinite_pred_pixels"] == 4.0
    assert abs(r["aAcc"] - 100.0 * 60 / 64) < 1e-9
    assert all(math.isfinite(r[k]) for k in ("aAcc", "mIoU", "mAcc"))
    assert r["mPrecision"] == 100.0 and r["mRecall"] < 100.0


def test_bad_inputs_name_the_tensor():
    ev = SegEvaluator(num_classes=4)
    with pytest.raises(ValueError, match="pred_logits"):
        ev.update(torch.randn(1, 3, 4, 4), torch.zeros(1, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="gt_seg"):
        ev.update(torch.randn(1, 4, 4, 4), torch.zeros(1, 8, 8))
    with pytest.raises(ValueError, match="gt_seg: labels"):
        ev.update(torch.randn(1, 4, 4, 4), torch.full((1, 8, 8), 7, dtype=torch.long))
    with pytest.raises(ValueError, match="batch"):
        ev.update(torch.randn(2, 4, 4, 4), torch.zeros(1, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="pred_labels"):
        ev.update(
            torch.zeros(1, 4, 4, dtype=torch.long),
            torch.zeros(1, 8, 8, dtype=torch.long),
            pred_is_labels=True,
        )
    with pytest.raises(ValueError, match="no scored pixel"):
        e2 = SegEvaluator(num_classes=4)
        e2.update(torch.randn(1, 4, 4, 4), torch.full((1, 8, 8), 255, dtype=torch.long))
        e2.compute()


@pytest.mark.openmmlab
def test_seg_metric_scores_pred_sem_seg_first_like_iou_metric():
    """A sample with both seg_logits and pred_sem_seg: IoUMetric scores pred_sem_seg, and so do we."""
    from mmseg.evaluation.metrics import IoUMetric

    from evaluators.mm_metrics import SegMetric

    c = 6
    logits, gt = _random_case(3, c=c)
    up = torch.nn.functional.interpolate(logits, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    labels = up.argmax(1)
    g = torch.Generator().manual_seed(5)
    flip = torch.rand(labels.shape, generator=g) < 0.3  # a post-processed map unlike the raw argmax
    labels = torch.where(flip, torch.randint(0, c, labels.shape, generator=g), labels)
    samples = [
        {
            "seg_logits": {"data": logits[i]},
            "pred_sem_seg": {"data": labels[i][None]},
            "gt_sem_seg": {"data": gt[i][None]},
        }
        for i in range(3)
    ]
    ref = IoUMetric(ignore_index=255, iou_metrics=["mIoU"], nan_to_num=0.0)
    ref.dataset_meta = {"classes": [f"c{i}" for i in range(c)]}
    ref.process({}, samples)
    want = ref.compute_metrics(ref.results)
    ours = SegMetric(num_classes=c, nan_to_num=0.0)
    ours.process({}, samples)
    got = ours.evaluate(3)
    for k in ("aAcc", "mIoU", "mAcc"):
        # mmseg rounds to 2 decimals; under NumPy 2 its value is a float32 (off by up to half an ulp, 4e-6)
        assert round(got[f"seg/{k}"], 2) == pytest.approx(float(want[k]), abs=5e-6), k


def test_one_channel_binary_logits():
    """A one-channel binary model (mmseg: sigmoid > 0.3) works with num_classes=2."""
    g = torch.Generator().manual_seed(0)
    logit = torch.randn(2, 1, 8, 8, generator=g)
    gt = torch.randint(0, 2, (2, 8, 8), generator=g)
    ev = SegEvaluator(num_classes=2)
    ev.update(logit, gt)
    ref = SegEvaluator(num_classes=2)
    ref.update((torch.sigmoid(logit[:, 0]) > 0.3).long(), gt)
    assert ev.compute()["mIoU"] == ref.compute()["mIoU"]
    with pytest.raises(ValueError, match="expected 6 channels"):
        SegEvaluator(num_classes=6).update(logit, gt)


def test_label_maps_and_unbatched_inputs_are_accepted():
    """update(labels, gt) reads integer maps as labels; one sample may come without a batch axis."""
    logits, gt = _random_case(4, c=6)
    up = torch.nn.functional.interpolate(logits, size=gt.shape[-2:], mode="bilinear", align_corners=False)
    ref = SegEvaluator(num_classes=6)
    ref.update(logits, gt)
    want = ref.compute()["mIoU"]
    for pred in (up.argmax(1), up.argmax(1).int(), up.argmax(1).numpy()):
        ev = SegEvaluator(num_classes=6)
        ev.update(pred, gt)
        assert ev.compute()["mIoU"] == pytest.approx(want, abs=1e-12)
    one = SegEvaluator(num_classes=6)
    for i in range(gt.shape[0]):
        one.update(logits[i], gt[i])  # C x h x w logits and H x W labels of one sample
    assert one.compute()["mIoU"] == pytest.approx(want, abs=1e-12)
    with pytest.raises(
        ValueError, match=r"pred_seg: expected B x 6 x h x w float logits or B x H x W integer"
    ):
        SegEvaluator(num_classes=6).update(up.argmax(1).float(), gt)


def test_fast_argmax_equals_argmax_with_ties():
    from evaluators.seg import fast_argmax

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 4, (2, 29, 7, 5), generator=g).float()  # many ties: first index wins
    assert torch.equal(fast_argmax(x), x.argmax(1))
