"""Evaluation of a trained decoder on the test features with the task's evaluator.

Rank r scores test samples r, r + N, ...; the evaluator states are then reduced across ranks
(``sync``), so every rank computes the metrics of the whole test split, and the same fixed-seed
bootstrap intervals over its test images (``protocol.bootstrap_resamples``, ``bootstrap_seed``,
``interval_level``) for the task's :data:`~benchmarks.probe.headline.INTERVAL_METRICS`.
"""

from __future__ import annotations

import math
import time

import torch

from benchmarks.probe.headline import interval_metrics
from benchmarks.probe.train import forward, select
from evaluators.runner import run_evaluation
from sapiens2 import distributed as dist_utils


@torch.no_grad()
def evaluate_decoder(
    task, decoder, features, targets: dict, indices: torch.Tensor, protocol, batch_size: int = 8
) -> tuple[dict, float, dict]:
    """Metrics of ``decoder`` on the test set.

    Args:
        task: the probing task.
        decoder: trained decoder (eval mode).
        features: test feature set.
        targets: test targets.
        indices: dataset index of every test sample (evaluator dedup key).
        protocol: the protocol.
        batch_size: evaluation batch size.

    Returns:
        (evaluator output dict, seconds, intervals): ``intervals`` is the record's ``intervals`` field
        (level, method ``"bootstrap"``, resamples, seed, ``n`` test images, ``bounds`` per metric).
    """
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    mine = torch.arange(features.feats.shape[0])[rank::world]

    def feed(evaluator, idx):
        maps, glob = forward(decoder, task, features, idx, protocol)
        task.update_evaluator(evaluator, maps, glob, select(targets, idx), indices[idx])

    chunks = (mine[s : s + batch_size] for s in range(0, len(mine), batch_size))
    evaluator = task.make_evaluator()
    res = run_evaluation(evaluator, chunks, feed, sync=world > 1)
    t0 = time.perf_counter()
    bounds = evaluator.bootstrap_intervals(
        interval_metrics(task.name, evaluator),
        resamples=protocol.bootstrap_resamples,
        level=protocol.interval_level,
        seed=protocol.bootstrap_seed,
    )
    intervals = {
        "level": protocol.interval_level,
        "method": "bootstrap",
        "resamples": protocol.bootstrap_resamples,
        "seed": protocol.bootstrap_seed,
        "n": evaluator.num_images,
        # a metric undefined on every resample has no interval (the record keeps its value alone)
        "bounds": {k: [float(lo), float(hi)] for k, (lo, hi) in bounds.items() if math.isfinite(lo + hi)},
    }
    return res.metrics, res.seconds + time.perf_counter() - t0, intervals
