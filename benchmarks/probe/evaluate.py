"""Evaluation of a trained decoder on the test features with the task's evaluator.

Rank r scores test samples r, r + N, ...; the evaluator states are then reduced across ranks
(``sync``), so every rank computes the metrics of the whole test split.
"""

from __future__ import annotations

import torch

from benchmarks.probe.train import forward, select
from evaluators.runner import run_evaluation
from sapiens2 import distributed as dist_utils


@torch.no_grad()
def evaluate_decoder(
    task, decoder, features, targets: dict, indices: torch.Tensor, protocol, batch_size: int = 8
) -> tuple[dict, float]:
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
        (evaluator output dict, seconds).
    """
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    mine = torch.arange(features.feats.shape[0])[rank::world]

    def feed(evaluator, idx):
        maps, glob = forward(decoder, task, features, idx, protocol)
        task.update_evaluator(evaluator, maps, glob, select(targets, idx), indices[idx])

    chunks = (mine[s : s + batch_size] for s in range(0, len(mine), batch_size))
    res = run_evaluation(task.make_evaluator(), chunks, feed, sync=world > 1)
    return res.metrics, res.seconds
