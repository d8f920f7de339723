"""A record's bootstrap intervals from an evaluator that has seen the whole test split.

The test pass (:func:`~benchmarks.probe.readout.stream.score_group`) reduces the evaluator states across
ranks, so every rank computes the metrics of the whole test split, and the same fixed-seed
bootstrap intervals over its test images (``protocol.bootstrap_resamples``, ``bootstrap_seed``,
``interval_level``) for the task's :data:`~benchmarks.probe.records.headline.INTERVAL_METRICS`. The resampled
values are computed once: the bounds are their percentile intervals, and they are saved beside the
record (:mod:`benchmarks.probe.records.sidefile`) for paired comparisons of two backbones
(:mod:`benchmarks.probe.records.compare`).
"""

from __future__ import annotations

import math
from pathlib import Path

from benchmarks.probe.records.sidefile import content_sha256, images_sha256, write_side_file
from evaluators.base import Evaluator
from evaluators.bootstrap import percentile_interval
from sapiens2 import distributed as dist_utils


def bootstrap_intervals_field(
    evaluator: Evaluator, metrics: list[str], *, resamples: int, level: float, seed: int,
    side_path: Path | None = None,
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
