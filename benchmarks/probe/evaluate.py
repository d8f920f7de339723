"""Evaluation of a trained decoder on the test features with the task's evaluator.

Rank r scores test samples r, r + N, ...; the evaluator states are then reduced across ranks
(``sync``), so every rank computes the metrics of the whole test split, and the same fixed-seed
bootstrap intervals over its test images (``protocol.bootstrap_resamples``, ``bootstrap_seed``,
``interval_level``) for the task's :data:`~benchmarks.probe.headline.INTERVAL_METRICS`. The resampled
values are computed once: the bounds are their percentile intervals, and they are saved beside the
record (:mod:`benchmarks.probe.sidefile`) for paired comparisons of two backbones
(:mod:`benchmarks.probe.compare`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from benchmarks.probe.headline import interval_metrics
from benchmarks.probe.sidefile import content_sha256, images_sha256, write_side_file
from benchmarks.probe.train import forward, select
from evaluators.bootstrap import percentile_interval
from evaluators.runner import run_evaluation
from sapiens2 import distributed as dist_utils


def bootstrap_intervals_field(
    evaluator, metrics: list[str], *, resamples: int, level: float, seed: int, side_path: Path | None = None
) -> dict:
    """A record's ``intervals`` from one bootstrap distribution of ``metrics``; optionally its side file.

    The bounds are :func:`~evaluators.bootstrap.percentile_interval` of
    ``evaluator.bootstrap_distribution(metrics, resamples=resamples, seed=seed)``, the very
    computation of ``evaluator.bootstrap_intervals``, so they are equal.

    Args:
        evaluator: an evaluator that has seen the whole test split.
        metrics: the metric keys to bootstrap.
        resamples: number of resamples.
        level: coverage of the intervals.
        seed: bootstrap seed.
        side_path: where to save the resampled values (rank 0 writes; None: no side file).

    Returns:
        ``{"level", "method": "bootstrap", "resamples", "seed", "n", "bounds", "images_sha256"}``, plus
        ``side_file`` (the side file's name, beside the record) and ``bootstrap_sha256`` with a side file.
    """
    dists = evaluator.bootstrap_distribution(metrics, resamples=resamples, seed=seed)
    bounds = {k: percentile_interval(v, level) for k, v in dists.items()}
    ids = evaluator.bootstrap_image_ids()
    intervals = {
        "level": level,
        "method": "bootstrap",
        "resamples": resamples,
        "seed": seed,
        "n": evaluator.num_images,
        # a metric undefined on every resample has no interval (the record keeps its value alone)
        "bounds": {k: [float(lo), float(hi)] for k, (lo, hi) in bounds.items() if math.isfinite(lo + hi)},
        "images_sha256": images_sha256(ids),
    }
    if side_path is not None:
        if dist_utils.is_main():
            write_side_file(side_path, dists, ids)
        intervals["side_file"] = Path(side_path).name
        intervals["bootstrap_sha256"] = content_sha256(dists, ids)
    return intervals


@torch.no_grad()
def evaluate_decoder(
    task, decoder, features, targets: dict, indices: torch.Tensor, protocol, batch_size: int = 8,
    side_path: Path | None = None,
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
        side_path: the record's bootstrap side file (None: none written).

    Returns:
        (evaluator output dict, seconds, intervals): ``intervals`` is the record's ``intervals`` field
        (see :func:`bootstrap_intervals_field`).
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
    intervals = bootstrap_intervals_field(
        evaluator,
        interval_metrics(task.name, evaluator),
        resamples=protocol.bootstrap_resamples,
        level=protocol.interval_level,
        seed=protocol.bootstrap_seed,
        side_path=side_path,
    )
    return res.metrics, res.seconds + time.perf_counter() - t0, intervals
