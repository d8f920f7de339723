"""A masked task's read-out shrunk toward the floor by one factor per channel, fitted on held-out rows.

The masked read-out predicts ``t_hat = A + mu_p (1 - B)`` (:mod:`benchmarks.probe.readout.shortcut`),
i.e. ``mu_p + g`` with the correction ``g = (x - mx_p) (W_A - mu_p W_B)``. ``A`` and ``B`` are each
fitted for their own squared error, so with weak features ``g`` can be worse than nothing: the errors
of ``B`` are multiplied by ``mu_p`` (metres, for the pointmap) and the prediction falls below the
feature-free floor ``mu_p`` (docs/design/readout_ceiling.md). The read-out therefore predicts
``mu_p + s_c g`` with one factor ``s_c`` in [0, 1] per output channel ``c``, the least-squares factor
of fold 0's correction on the held-out train rows' mask pixels:

    s_c = clip(sum B d g / sum B g^2, 0, 1),   d = t - mu_p   (fold 0's fit, means and prior)

* features that hold the ground truth give ``g = d`` on the held-out rows, so ``s_c = 1`` (the ceiling);
* features without information give ``s_c`` near 0 (the floor), and the held-out squared error is
  never above the floor's (``s_c = 0`` is a candidate);
* the infinite penalty has ``g = 0``: ``s_c = 0`` and the prediction is ``mu_p`` bit for bit.

Only the output pixels that a fold-0 mask covers are scored (elsewhere fold 0 has no prior, and the
error of its zero would decide ``s_c``). The sums need the held-out rows' features once more: one
more streamed pass over the held-out quarter of the train split (:func:`heldout_shrink`), whose
features come from the backbone's feature cache when the run keeps one. Two numbers per channel are
kept and all-reduced under torch.distributed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from benchmarks.probe.data.batching import select
from benchmarks.probe.readout.ridge import solve_fold, within_positions
from benchmarks.probe.readout.ridge_sums import PositionSums, RidgeStats
from sapiens2 import distributed as dist_utils

if TYPE_CHECKING:
    from benchmarks.probe.data.batching import SceneBatch
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.features.store import FeatureSet
    from benchmarks.probe.tasks.base import ProbeTask

# the masked read-out forms (TaskSettings.masked_readout): the composed prediction as fitted, and the
# one shrunk toward the floor per channel on the held-out rows
MASK_AND_PRIOR = "mask-and-prior"
MASK_AND_PRIOR_SHRUNK = "mask-and-prior-shrunk"
MASKED_FORMS = (MASK_AND_PRIOR, MASK_AND_PRIOR_SHRUNK)


def compose(z: torch.Tensor, prior: torch.Tensor, k: int, rr: int) -> torch.Tensor:
    """``A + mu (1 - B)`` from ... x P x (k + 1) * rr read-out columns ``[A, B]`` (channel-major, as
    :func:`~benchmarks.probe.readout.shortcut.to_grid` lays out ``[mask * t, mask]``) and the
    P x k * rr prior ``mu``."""
    a, m = z[..., : k * rr], z[..., k * rr :]
    return a + prior * (1 - m).repeat(*([1] * (m.dim() - 1)), k)


def masked_prior(sy: torch.Tensor, k: int, rr: int) -> torch.Tensor:
    """P x k * rr train prior ``mu_p``: the sum of ``mask * t`` over the sum of the mask at each output
    pixel (0 where no train mask covers it), from the per-position sums ``sy`` of ``[A, B]``."""
    st, sm = sy[:, : k * rr], sy[:, k * rr :].repeat(1, k)
    return torch.where(sm > 0, st / sm.clamp_min(1e-12), torch.zeros_like(st))


def shrink_toward(t_hat: torch.Tensor, prior: torch.Tensor, factors: torch.Tensor, rr: int) -> torch.Tensor:
    """``mu + s_c (t_hat - mu)`` of ... x P x k * rr predictions (``factors``: the k values ``s_c``).

    A factor of exactly 0 gives ``mu`` bit for bit (the floor)."""
    s = factors.to(t_hat).repeat_interleave(rr)
    return prior + s * (t_hat - prior)


class HeldoutShrink:
    """Per-channel sums ``sum B d g`` and ``sum B g^2`` of fold 0's read-out on held-out rows.

    Args:
        weight: fold 0's C x (k + 1) * rr weights at the chosen penalty (float64, on rows centred on
            fold 0's per-position feature means).
        positions: the task's :class:`PositionSums` (shifted feature sums; fold 0's means and prior).
        k: output channels.
        rr: sub-pixels per feature position.
    """

    def __init__(self, weight: torch.Tensor, positions: PositionSums, k: int, rr: int):
        self.weight, self.k, self.rr = weight, k, rr
        _, self.mx0, self.my0 = positions.means([0])
        self.prior0 = masked_prior(positions.sy[0], k, rr)
        # output pixels a fold-0 mask covers: fold 0 has a prior there
        self.covered = (positions.sy[0][:, k * rr :] > 0).double().repeat(1, k)
        self.sums = torch.zeros(2, k, dtype=torch.float64)  # rows: sum B d g, sum B g^2

    def update(self, xs: torch.Tensor, y: torch.Tensor) -> None:
        """Add held-out rows: shifted float64 features ``xs`` (whole images, R x C) and their read-out
        targets ``y`` (R x (k + 1) * rr: ``[mask * t, mask]``)."""
        k, rr, pos = self.k, self.rr, self.mx0.shape[0]
        dev = xs.device
        xc = xs.view(-1, pos, xs.shape[1]) - self.mx0.to(dev)
        z = xc @ self.weight.to(dev) + self.my0.to(dev)
        prior = self.prior0.to(dev)
        g = compose(z, prior, k, rr) - prior
        y = y.double().view(-1, pos, y.shape[1]).to(dev)
        mask = y[..., k * rr :].repeat(1, 1, k)
        covered = self.covered.to(dev)
        b = mask * covered
        bd = (y[..., : k * rr] - mask * prior) * covered  # B (t - mu) = A - B mu
        self.sums[0] += (bd * g).view(-1, k, rr).sum((0, 2)).cpu()
        self.sums[1] += (b * g.square()).view(-1, k, rr).sum((0, 2)).cpu()

    def factors(self) -> torch.Tensor:
        """The k factors ``clip(sum B d g / sum B g^2, 0, 1)`` (0 where ``sum B g^2`` is 0)."""
        dg, gg = self.sums
        s = torch.where(gg > 0, dg / gg.clamp_min(1e-300), torch.zeros_like(dg))
        return s.clamp(0.0, 1.0)


def heldout_shrink(stats: RidgeStats, positions: PositionSums, task: ProbeTask, rr: int,
                   alpha: float) -> HeldoutShrink | torch.Tensor | None:
    """A masked task's :class:`HeldoutShrink` at penalty ``alpha`` (fold 0 refitted alone), or the
    factors themselves when no held-out pass is needed.

    Returns:
        a :class:`HeldoutShrink` to stream the held-out rows into, or a k-tensor of factors: 0 at the
        infinite penalty (the correction is 0: the floor), 1 without a held-out fold (nothing to fit
        them on); None when the task's form is not shrunk.

    ``stats`` must hold its Grams (:func:`~benchmarks.probe.readout.shortcut.solve_readout` sets them).
    """
    k = task.out_channels
    if task.settings.masked_readout != MASK_AND_PRIOR_SHRUNK:
        return None
    if math.isinf(alpha):
        return torch.zeros(k, dtype=torch.float64)
    if len(stats.folds) < 2 or not (stats.folds[0].n and stats.folds[1].n):
        return torch.ones(k, dtype=torch.float64)
    within, _ = within_positions(stats, positions)
    return HeldoutShrink(solve_fold(within.folds[0], alpha)[0], positions, k, rr)


def stream_heldout(loader: SceneLoader, group: tuple[str, ...], tasks: dict[str, ProbeTask],
                   stream: Callable[[SceneBatch, ProbeTask], FeatureSet], state: tuple[dict, dict, dict],
                   scores: dict[str, HeldoutShrink], folds: torch.Tensor) -> None:
    """Stream the held-out train rows once more into the masked tasks' :class:`HeldoutShrink` sums.

    Only the held-out images go through the feature stream (a sub-batch of each batch); their features
    are shifted as the train pass's were. Under torch.distributed each rank reads its own batches and
    the sums are all-reduced.

    Args:
        loader, group, tasks, stream: as :func:`~benchmarks.probe.readout.stream.fit_group`.
        state: the train pass's ``(feature sums per stream key, tasks reading each key, task sums)``.
        scores: ``{task: HeldoutShrink}``.
        folds: the fold of every train image.
    """
    streams, readers, sums = state
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    keys = [k for k in streams if any(t in scores for t in readers[k])]
    for batch in loader.batches(group, rank, world):
        rows = torch.nonzero(folds[batch.positions] == 1).flatten()
        if not len(rows):
            continue
        held = replace(batch, positions=batch.positions[rows], index=batch.index[rows],
                       ids=[batch.ids[int(i)] for i in rows], images=batch.images[rows],
                       targets={t: select(v, rows) for t, v in batch.targets.items()})
        for key in keys:
            fs = stream(held, tasks[key])
            f = fs.feats.float()
            x = f.permute(0, 2, 3, 1).reshape(-1, f.shape[1]).to(streams[key].device)
            xs = x.double() - streams[key].shift.to(x.device)
            for t in readers[key]:
                if t in scores:
                    scores[t].update(xs, sums[t].y_rows(held.targets[t]).to(xs.device))
    if world > 1:
        for s in scores.values():
            dist_utils.all_reduce_(s.sums)
