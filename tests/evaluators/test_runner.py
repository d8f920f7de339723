"""The one evaluation loop (``evaluators.runner``) hands every sample's dataset index to its evaluator.

A distributed sampler pads the last batch with samples seen before; only the dataset index lets
the evaluator count such a sample once. These tests feed a padded sample whose (repeated)
prediction differs, through every update builder of the runner, and check that the metrics are
those of the distinct samples and that the evaluator saw exactly their indices.
"""

from __future__ import annotations

import pytest
import torch

from evaluators.registry import build_evaluator
from evaluators.runner import dense_update, run_evaluation, sample_update


def _seg_batch(i: int, right: bool):
    gt = torch.zeros(1, 4, 4, dtype=torch.int64)
    gt[:, :, 2:] = 1
    pred = gt.clone() if right else 1 - gt
    return pred, gt, None


def _normal_batch(i: int, right: bool):
    gt = torch.zeros(1, 3, 4, 4)
    gt[:, 2] = 1.0
    pred = gt.clone()
    if not right:
        pred[:, 2], pred[:, 0] = 0.0, 1.0  # 90 degrees off
    return pred, gt, torch.ones(1, 4, 4, dtype=torch.bool)


CASES = {"seg": (_seg_batch, "mIoU", 100.0), "normal": (_normal_batch, "normal_mae", 0.0)}


def _dense_updates(task, batch):
    """Samples 0 and 1 right, then sample 0 again (the sampler's padding) with a wrong prediction."""
    out = []
    for i, right in ((0, True), (1, True), (0, False)):
        pred, gt, mask = batch(i, right)
        out.append(dense_update(task, pred, gt, mask, index=[i], pred_is_labels=task == "seg"))
    return out


def _sample_updates(task, batch):
    from sapiens2.tasks import get_task

    feed = get_task(task).feed
    out = []
    for i, right in ((0, True), (1, True), (0, False)):
        pred, gt, mask = batch(i, right)
        sample = {"index": i, feed.gt_key: gt[0]}
        if feed.mask_key:
            sample[feed.mask_key] = mask[0]
        out.append(sample_update(task, pred, [sample], pred_is_labels=task == "seg"))
    return out


@pytest.mark.parametrize("builder", [_dense_updates, _sample_updates], ids=["dense_update", "sample_update"])
@pytest.mark.parametrize("task", sorted(CASES))
def test_a_padded_repeat_counts_once_through_the_runner(task, builder):
    batch, key, perfect = CASES[task]
    ev = build_evaluator(task)
    res = run_evaluation(ev, builder(task, batch))
    assert res.updates == 3
    assert ev.seen_indices().tolist() == [0, 1]
    assert res.metrics["num_samples"] == 2.0
    assert res.metrics[key] == pytest.approx(perfect)


def test_dict_of_evaluators_keeps_each_updates_index():
    batch, key, perfect = CASES["normal"]
    ups = _dense_updates("normal", batch)
    for u in ups:
        u.to = "normal"
    evs = {"normal": build_evaluator("normal")}
    res = run_evaluation(evs, ups)
    assert evs["normal"].seen_indices().tolist() == [0, 1]
    assert res.metrics["normal"][key] == pytest.approx(perfect)
