"""mmengine BaseMetric adapters: built by name through mmengine's Evaluator, equal to our evaluators."""

from __future__ import annotations

import pytest
import torch
from mmengine.evaluator import Evaluator as MMEvaluator

import evaluators.registry  # noqa: F401  (the sapiens2 metric scope, as a config's custom_imports)
from evaluators import AlbedoEvaluator, NormalEvaluator, PointmapEvaluator, SegEvaluator


def _dense_batch(task, seed=0, b=3, h=12, w=10):
    g = torch.Generator().manual_seed(seed)
    gt = torch.rand(b, 3, h, w, generator=g) + (2.0 if task == "pointmap" else 0.0)
    pred = gt + 0.1 * torch.randn(b, 3, h, w, generator=g)
    mask = torch.rand(b, h, w, generator=g) > 0.2
    return pred, gt, mask


@pytest.mark.parametrize(
    "task,cls", [("normal", NormalEvaluator), ("pointmap", PointmapEvaluator), ("albedo", AlbedoEvaluator)]
)
def test_dense_adapters(task, cls):
    pred, gt, mask = _dense_batch(task)
    ev = MMEvaluator(dict(type=f"sapiens2.{task.capitalize()}Metric"))
    samples = [
        {f"pred_{task}": {"data": pred[i]}, f"gt_{task}": gt[i], "mask": mask[i], "sample_idx": i}
        for i in range(3)
    ]
    ev.process(samples[:2])
    ev.process(samples[2:] + samples[:1])  # a repeated sample (as a padded duplicate) counts once
    got = ev.evaluate(3)
    ref = cls()
    ref.update(pred, gt, mask)
    want = ref.compute()
    assert got[f"{task}/num_samples"] == 3.0
    for k, v in want.items():
        if isinstance(v, float):
            assert got[f"{task}/{k}"] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_seg_adapter_with_logits_and_labels():
    g = torch.Generator().manual_seed(1)
    gt = torch.randint(0, 4, (2, 8, 8), generator=g)
    logits = torch.randn(2, 4, 4, 4, generator=g)
    ev = MMEvaluator(dict(type="sapiens2.SegMetric", num_classes=4))
    ev.process([{"seg_logits": {"data": logits[i]}, "gt_sem_seg": {"data": gt[i][None]}} for i in range(2)])
    got = ev.evaluate(2)
    ref = SegEvaluator(num_classes=4)
    ref.update(logits, gt)
    assert got["seg/mIoU"] == pytest.approx(ref.compute()["mIoU"])
    lab = MMEvaluator(dict(type="sapiens2.SegMetric", num_classes=4, prefix="parts"))
    lab.process(
        [{"pred_sem_seg": {"data": gt[i][None]}, "gt_sem_seg": {"data": gt[i][None]}} for i in range(2)]
    )
    assert lab.evaluate(2)["parts/mIoU"] == 100.0


def test_registry_lists_the_adapters():
    from evaluators.registry import METRICS
    from sapiens2.registry import build_from_cfg_checked

    m = build_from_cfg_checked(METRICS, dict(type="AlbedoMetric"))
    assert type(m).__name__ == "AlbedoMetric"
    with pytest.raises(KeyError, match="SegMetric"):
        build_from_cfg_checked(METRICS, dict(type="NoSuchMetric"))
    with pytest.raises(KeyError, match="lack 'mask'"):
        ev = MMEvaluator(dict(type="sapiens2.NormalMetric"))
        ev.process([{"pred_normal": torch.zeros(3, 4, 4), "gt_normal": torch.zeros(3, 4, 4)}])
