"""Row selection shared by decoder training, the shortcut fit and evaluation.

Example:
    >>> import torch
    >>> from benchmarks.probe.data.batching import batch_indices, select
    >>> select({"y": torch.arange(5)}, torch.tensor([4, 0]))["y"].tolist()
    [4, 0]
    >>> torch.equal(batch_indices(10, 4, seed=0, it=3), batch_indices(10, 4, seed=0, it=3))
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class SceneBatch:
    """One batch of a scene group (:mod:`benchmarks.probe.data.loader`): scene positions in the split,
    dataset indices, ids, images and every task's targets."""

    positions: torch.Tensor
    index: torch.Tensor
    ids: list[str]
    images: torch.Tensor
    targets: dict[str, dict]


def select(tgt: dict, idx: torch.Tensor) -> dict:
    """Rows ``idx`` of every target tensor."""
    return {k: v[idx] for k, v in tgt.items()}


def batch_indices(n: int, batch_size: int, seed: int, it: int) -> torch.Tensor:
    """Indices of the global batch of iteration ``it`` (sampled without replacement when n >= batch).

    A deterministic function of ``(seed, it)``: a resumed run and a run on N ranks see exactly the
    batches of an uninterrupted single-process run.
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + it)
    if n >= batch_size:
        return torch.randperm(n, generator=g)[:batch_size]
    return torch.randint(0, n, (batch_size,), generator=g)
