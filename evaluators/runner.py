"""The one loop that feeds predictions to evaluators.

The probe, the paper-table reproduction, the reference systems and ``sapiens2-bench eval`` all
call :func:`run_evaluation`: it walks an iterable of :class:`Update` (or of any items plus a
``feed`` function), passes each to its evaluator, optionally reduces the states across processes,
and returns the metrics with the time taken. How a task's predictions and reader samples become
evaluator arguments is read off the task table (``sapiens2.tasks``, ``TaskSpec.feed``) by
:func:`dense_update` and :func:`sample_update`.

Example:
    >>> import torch
    >>> from evaluators.registry import build_evaluator
    >>> gt = torch.zeros(2, 3, 4, 4)
    >>> gt[:, 2] = 1.0  # every normal along +z
    >>> pred = gt.clone()
    >>> pred[1, 2], pred[1, 0] = 0.0, 1.0  # sample 1 predicts +x: 90 degrees off
    >>> mask = torch.ones(2, 4, 4, dtype=torch.bool)
    >>> ups = [dense_update("normal", pred[i:i + 1], gt[i:i + 1], mask[i:i + 1], index=[i]) for i in range(2)]
    >>> res = run_evaluation(build_evaluator("normal"), ups)
    >>> round(res.metrics["normal_mae"], 3), res.updates
    (45.0, 2)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from sapiens2.tasks import get_task


@dataclass
class Update:
    """One ``evaluator.update(*args, **kwargs)`` call.

    Attributes:
        args: positional arguments (e.g. ``pred, gt, mask``).
        kwargs: keyword arguments (``index=...``, ``pred_is_labels=...``).
        to: key of the evaluator when :func:`run_evaluation` is given a dict of evaluators.
    """

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    to: str | None = None


@dataclass
class RunResult:
    """What :func:`run_evaluation` returns.

    Attributes:
        metrics: ``compute()`` of the evaluator (a dict of them for a dict of evaluators).
        seconds: wall time of the loop (producing the predictions included) and the compute.
        updates: number of items fed.
    """

    metrics: dict
    seconds: float
    updates: int


def dense_update(task: str, pred, gt, mask=None, index=None, pred_is_labels: bool = False) -> Update:
    """The update call of a per-pixel task, as the task table's ``feed`` says.

    Args:
        task: a dense task name.
        pred: B x C x h x w predictions (seg: logits, or B x H x W labels with ``pred_is_labels``).
        gt: B x ... ground truth.
        mask: B x H x W valid pixels (tasks whose feed has a ``mask_key``).
        index: dataset indices (the evaluators' dedup key).
        pred_is_labels: seg only: ``pred`` holds labels.
    """
    feed = get_task(task).feed
    if feed.kind == "labels":
        return Update((pred, gt), {"pred_is_labels": pred_is_labels, "index": index})
    if feed.kind == "dense":
        if mask is None:
            raise ValueError(f"{task}: the evaluator needs a mask ({feed.mask_key!r})")
        return Update((pred, gt, mask), {"index": index})
    raise ValueError(f"{task}: not a per-pixel task (feed {feed.kind!r}); build its Update directly")


def sample_update(task: str, pred, samples: list[dict], pred_is_labels: bool = False) -> Update:
    """The update call of a dense task from a batch of reader samples (GT and mask keys from the table).

    Args:
        task: a dense task name.
        pred: predictions of the samples, first dim = sample.
        samples: reader sample dicts (``index``, the task's GT key and mask key).
        pred_is_labels: seg only: ``pred`` holds labels.
    """
    feed = get_task(task).feed
    gt = torch.stack([torch.as_tensor(s[feed.gt_key]) for s in samples])
    mask = torch.stack([torch.as_tensor(s[feed.mask_key]) for s in samples]) if feed.mask_key else None
    index = [int(s["index"]) for s in samples]
    return dense_update(task, pred, gt, mask, index=index, pred_is_labels=pred_is_labels)


def run_evaluation(
    evaluators,
    items: Iterable,
    feed: Callable[[Any, Any], None] | None = None,
    *,
    sync: bool = False,
    progress: bool = False,
    desc: str | None = None,
    total: int | None = None,
) -> RunResult:
    """Feed every item to the evaluator(s) and compute the metrics.

    Args:
        evaluators: one evaluator, or a dict of them (each :class:`Update` names its ``to``).
        items: :class:`Update` objects (None items are skipped: e.g. a missed detection), or any
            items when ``feed`` is given.
        feed: ``feed(evaluators, item)`` doing the updates for an item (when the items are not
            :class:`Update`).
        sync: reduce the evaluator states across processes before computing (each process fed
            its own share).
        progress: show a progress bar.
        desc: progress bar label.
        total: number of items, for the progress bar.

    Returns:
        :class:`RunResult` with the metrics (a dict of them for a dict of evaluators).
    """
    from tqdm import tqdm

    t0 = time.perf_counter()
    many = isinstance(evaluators, Mapping)
    count = 0
    for item in tqdm(items, desc=desc, total=total, disable=not progress, leave=False):
        if item is None:
            continue
        if feed is not None:
            feed(evaluators, item)
        elif not isinstance(item, Update):
            raise TypeError(f"run_evaluation: items must be Update objects (or pass feed=), got {type(item)}")
        else:
            if many and item.to not in evaluators:
                raise KeyError(f"update for evaluator {item.to!r}; known: {', '.join(map(str, evaluators))}")
            (evaluators[item.to] if many else evaluators).update(*item.args, **item.kwargs)
        count += 1
    evs = dict(evaluators) if many else {None: evaluators}
    if sync:
        for ev in evs.values():
            ev.sync()
    metrics = {k: ev.compute() for k, ev in evs.items()}
    return RunResult(metrics if many else metrics[None], time.perf_counter() - t0, count)
