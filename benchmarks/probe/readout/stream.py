"""The probe's spine: data -> features -> read-out statistics -> solve -> test stream -> evaluators.

The closed-form read-out (:mod:`benchmarks.probe.readout.shortcut`) needs sums over rows only, so the probe
never holds a split: a :class:`~benchmarks.probe.data.loader.SceneLoader` reads one batch of scenes at a
time (each scene once for all the tasks of its group), the backbone computes that batch's features
once for every task of the group, and they are folded at once into

1. per feature stream: the Gram matrix of each fold about a channel shift and the per-position
   feature sums (shared by the tasks that read the same features);
2. per task: ``x^T y``, target sums and squares per fold, per-position target sums.

A masked task's per-pixel prior comes from the same per-position target sums. The penalty search on
the held-out train images and the refit on all of them then use the same sums. The test pass streams the
test split the same way into the task's evaluator, which keeps only the per-image rows its bootstrap
needs. Under torch.distributed each rank streams every ``world``-th batch; the sums are all-reduced
(float64) and the evaluator states synced, so every rank solves and scores the whole split.

What grows with the number of images: nothing but the evaluators' per-image rows (bytes per image).
The trained body (:mod:`benchmarks.probe.train.body_stream`) rides on the same train pass, spilling its
train split to disk, and scores its decoders with the same test pass (:class:`DecoderReadout`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from tqdm.auto import tqdm

from benchmarks.probe.data.batching import select
from benchmarks.probe.features.store import FeatureSet
from benchmarks.probe.readout.feature_streams import FeatureStream, ReferenceStream
from benchmarks.probe.readout.products import add_gram, symmetrize_
from benchmarks.probe.readout.ridge import clear_shared
from benchmarks.probe.readout.ridge_sums import PositionSums, RidgeStats
from benchmarks.probe.readout.shortcut import (
    LinearShortcut,
    ReadoutGeometry,
    _rows,
    holdout_fold,
    readout_columns,
    solve_readout,
    to_grid,
)
from benchmarks.probe.readout.shrink import HeldoutShrink, heldout_shrink, stream_heldout
from sapiens2 import distributed as dist_utils

if TYPE_CHECKING:
    from benchmarks.probe.data.batching import SceneBatch
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.protocol import ProbeProtocol
    from benchmarks.probe.readout.decoders import ProbeDecoder
    from benchmarks.probe.tasks.base import ProbeTask


@dataclass
class StageTimes:
    """Seconds per stage of one group's streamed probe (this rank)."""

    data_s: float = 0.0  # reading scenes, resizing images, building targets (the loader)
    forward_s: float = 0.0  # backbone features (cache reads included)
    stats_s: float = 0.0  # read-out targets on the grid and the sums
    solve_s: float = 0.0  # penalty search and refit
    test_s: float = 0.0  # test features excluded: read-out maps and evaluator updates

    def add(self, other: StageTimes) -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass
class _FeatureSums:
    """One feature stream's shared sums: Gram per fold and per-position feature sums (shifted)."""

    shift: torch.Tensor
    grams: list
    positions: PositionSums
    product_dtype: torch.dtype
    device: str = "cpu"
    exact: bool = False
    key: str = field(default_factory=lambda: f"stream-{uuid.uuid4().hex}")

    @classmethod
    def start(cls, fs: FeatureSet, product_dtype: torch.dtype, device: str = "cpu",
              exact: bool = False) -> _FeatureSums:
        """``exact``: the plain product-then-add arithmetic (the reference rows: the oracle's fit, whose
        penalty goes down to 1e-9, turns a different order of float64 additions into a different pose
        EPE), else BLAS syrk for the Gram and block-sparse ``x^T y``
        (:func:`~benchmarks.probe.readout.products.add_cross`)."""
        # any shift gives the same fit; one near the data keeps float32 products accurate: the mean of
        # the split's first batch, which every rank computes alike
        x = fs.feats.double()
        c, p = x.shape[1], x.shape[2] * x.shape[3]
        # the products need float64 rows (the shifted ones): a CUDA device has float64, MPS has not
        device = str(device) if str(device).startswith("cuda") else "cpu"
        return cls(x.mean(dim=(0, 2, 3)), [torch.zeros(c, c, dtype=torch.float64) for _ in range(2)],
                   PositionSums(p, c, 1), product_dtype, device, exact)

    def update(self, x: torch.Tensor, fold: int) -> torch.Tensor:
        """Add rows ``x`` (whole images); returns them shifted (float64, on the stream's device).

        The batch's products run on the device the backbone ran on (the rows are moved there once);
        every sum is added to float64 tensors on the host.
        """
        x = x.to(self.device)
        xs = x.double() - self.shift.to(x.device)
        self.positions.update(xs, None, fold=fold)
        xp = xs.to(self.product_dtype)
        add_gram(self.grams[fold], xp, exact=self.exact)  # the lower triangle: finish() mirrors it
        return xs

    def tensors(self) -> list[torch.Tensor]:
        return [*self.grams, self.positions.sx]

    def finish(self) -> None:
        """After the last batch (and the all-reduce): the Grams' upper triangles from their lower ones."""
        if not self.exact:  # exact: the full products were added, kept as they are
            for g in self.grams:
                symmetrize_(g)


class _TaskSums:
    """One task's read-out sums (``x^T y``, target sums per fold and per position)."""

    def __init__(self, task: ProbeTask, geom: ReadoutGeometry, feats: _FeatureSums, channels: int):
        self.task, self.geom, self.feats = task, geom, feats
        self.rr = geom.r * geom.r
        cols = readout_columns(task, self.rr)  # a masked task's mask * t and mask
        self.stats = RidgeStats(channels, cols, x_key=feats.key, shift=feats.shift,
                                product_dtype=feats.product_dtype)
        self.positions = PositionSums(geom.grid[0] * geom.grid[1], channels, cols)

    def y_rows(self, tgt: dict) -> torch.Tensor:
        g = self.geom
        return _rows(to_grid(self.task.linear_targets(tgt), g.grid, g.r, g.out_size, g.valid_frac))

    def update(self, xs: torch.Tensor, tgt: dict, fold: int) -> None:
        """Add the shifted float64 rows ``xs`` (from :meth:`_FeatureSums.update`) and their targets."""
        y = self.y_rows(tgt).to(xs.device)
        self.stats.update(xs, y, fold=fold, gram=False, shifted=True, block=self.rr, exact=self.feats.exact)
        self.positions.update(None, y, fold=fold)

    def tensors(self) -> list[torch.Tensor]:
        out = [self.positions.n, self.positions.sy]
        for f in self.stats.folds:
            if f.n:
                out += [f.sx, f.sy, f.xy, f.yy]
        return out

    def solve(self, protocol: ProbeProtocol, alphas: Sequence[float] | None = None) -> LinearShortcut:
        self.positions.sx = self.feats.positions.sx.to(self.positions.sx)
        return solve_readout(self.stats, self.positions, self.feats.grams, self.feats.shift, self.task,
                             self.geom.r, protocol, alphas)

    def shrink(self, alpha: float) -> HeldoutShrink | torch.Tensor | None:
        """A masked task's shrink toward the floor at the penalty it was solved with (after
        :meth:`solve`): :func:`~benchmarks.probe.readout.shrink.heldout_shrink`."""
        if not self.task.masked:
            return None
        return heldout_shrink(self.stats, self.positions, self.task, self.rr, alpha)


# below this many feature channels the syrk Gram and the block-sparse x^T y gained nothing measurable in
# the main job (256x192, 384-1536 channels: 422 s against 401 s side by side), so the plain arithmetic
# stays there and its records stay bit for bit; at sapiens2_1b's 6144 they are 1.6x and 5-6x
# (benchmarks/speed/cross_products.py)
FAST_PRODUCTS_MIN_CHANNELS = 2048


def _exact_sums(stream: FeatureStream, fs: FeatureSet) -> bool:
    """Whether a feature stream keeps the plain product-then-add arithmetic (:class:`_FeatureSums`)."""
    return isinstance(stream, ReferenceStream) or fs.feats.shape[1] < FAST_PRODUCTS_MIN_CHANNELS


def _reduce_stats(stats: RidgeStats) -> None:
    """All-reduce every fold of ``stats`` (a fold a rank saw no row of takes part with zeros)."""
    c, o = stats.in_dim, stats.out_dim
    for f in stats.folds:
        n = dist_utils.all_reduce_(torch.tensor([float(f.n)], dtype=torch.float64))
        parts = [f.sx, f.sy, f.xy, f.yy] if f.n else [torch.zeros(c, dtype=torch.float64),
                                                        torch.zeros(o, dtype=torch.float64),
                                                        torch.zeros(c, o, dtype=torch.float64),
                                                        torch.zeros(o, dtype=torch.float64)]
        for t in parts:
            dist_utils.all_reduce_(t)
        f.n = int(n.item())
        f.sx, f.sy, f.xy, f.yy = parts
        if f.xx is None:
            f.xx = torch.zeros((), dtype=torch.float64)


def fit_group(
    loader: SceneLoader,
    group: tuple[str, ...],
    tasks: dict[str, ProbeTask],
    stream: FeatureStream,
    protocol: ProbeProtocol,
    desc: str = "train",
    on_batch: Callable[[SceneBatch], None] | None = None,
    alphas: Sequence[float] | None = None,
) -> tuple[dict, StageTimes]:
    """Stream the train split of one scene group into every task's read-out and solve it.

    Args:
        loader: the train :class:`~benchmarks.probe.data.loader.SceneLoader`.
        group: the group's task names (``loader.groups``).
        tasks: ``{name: ProbeTask}``.
        stream: a :class:`~benchmarks.probe.readout.feature_streams.BackboneStream` or ``ReferenceStream``.
        protocol: the protocol.
        desc: progress-bar label.
        on_batch: called with every train batch this rank reads (e.g.
            :meth:`~benchmarks.probe.train.spill.TrainSpill.add`, which spills a trained body's targets).

        alphas: penalty grid instead of the protocol's (``()``: the infinite penalty alone, i.e. the
            feature-free floor's read-out of these features).

    Returns:
        (``{task: LinearShortcut}``, stage times of this rank).
    """
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    times = StageTimes()
    n = loader.num_samples(group)
    folds = holdout_fold(n, protocol.ridge_holdout_every)
    product_dtype = getattr(torch, protocol.ridge_product_dtype)
    # the split's first batch fixes the shift and the geometry; every rank computes it alike
    t0 = time.perf_counter()
    first = next(iter(loader.batches(group, 0, 1)))
    t1 = time.perf_counter()
    keys = group[:1] if stream.shared else group  # one feature stream per key
    first_fs = {k: stream(first, tasks[k]) for k in keys}
    times.data_s += t1 - t0
    times.forward_s += time.perf_counter() - t1
    device = getattr(stream, "device", "cpu")  # the reference rows are made on the host
    streams = {k: _FeatureSums.start(fs, product_dtype, device, _exact_sums(stream, fs))
               for k, fs in first_fs.items()}
    readers = {k: (group if stream.shared else (k,)) for k in keys}  # the tasks reading each stream
    sums = {}
    for k in keys:
        for t in readers[k]:
            geom = ReadoutGeometry.of(tasks[t], first_fs[k], protocol)
            sums[t] = _TaskSums(tasks[t], geom, streams[k], first_fs[k].feats.shape[1])
    bar = tqdm(total=n, desc=desc, unit="img", disable=rank != 0, leave=False, mininterval=1.0)
    t_data = time.perf_counter()
    for batch in loader.batches(group, rank, world):
        t0 = time.perf_counter()
        times.data_s += t0 - t_data
        if rank == 0 and int(batch.positions[0]) == 0:
            feats = first_fs
        else:
            feats = {k: stream(batch, tasks[k]) for k in keys}
        t1 = time.perf_counter()
        times.forward_s += t1 - t0
        if on_batch is not None:
            on_batch(batch)
            times.data_s += time.perf_counter() - t1
            t1 = time.perf_counter()
        fb = folds[batch.positions]
        for f in (0, 1):
            rows = torch.nonzero(fb == f).flatten()
            if not len(rows):
                continue
            for k, fs in feats.items():
                xs = streams[k].update(_rows(fs.feats[rows].float()), f)
                for t in readers[k]:
                    sums[t].update(xs, select(batch.targets[t], rows), f)
        times.stats_s += time.perf_counter() - t1
        bar.update(len(batch.positions) * world)
        t_data = time.perf_counter()
    bar.close()
    t0 = time.perf_counter()
    if world > 1:
        for s in streams.values():
            for t in s.tensors():
                dist_utils.all_reduce_(t)
        for s in sums.values():
            dist_utils.all_reduce_(s.positions.n)
            dist_utils.all_reduce_(s.positions.sy)
            _reduce_stats(s.stats)
    for s in streams.values():
        s.finish()
    fits = {t: sums[t].solve(protocol, alphas) for t in group}
    shrinks = {t: sums[t].shrink(fits[t].fit.alpha) for t in group}
    pending = {t: s for t, s in shrinks.items() if isinstance(s, HeldoutShrink)}
    if pending:  # the held-out train rows once more: fold 0's correction against their targets
        stream_heldout(loader, group, tasks, stream, (streams, readers, sums), pending, folds)
    for t, s in shrinks.items():
        if s is not None:
            fits[t].shrink = s.factors() if isinstance(s, HeldoutShrink) else s
    clear_shared()  # the stream's decompositions: no later group reads them
    times.solve_s += time.perf_counter() - t0
    return fits, times


def scene_groups(train: SceneLoader,
                 test: SceneLoader) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Yield (train group, test group) of two :class:`~benchmarks.probe.data.loader.SceneLoader` objects:
    tasks that share train scenes must share test scenes."""
    for group in train.groups:
        test_group = test.group_of(group[0])
        if any(test.group_of(t) != test_group for t in group):
            raise ValueError(f"probe: tasks {group} share train scenes but not test scenes")
        yield group, test_group


class DecoderReadout:
    """A trained decoder (its shortcut attached) as :func:`score_group` calls a read-out."""

    def __init__(self, decoder: ProbeDecoder, cls_concat: bool):
        self.decoder, self.cls_concat = decoder, cls_concat

    @torch.no_grad()
    def outputs(self, fs: FeatureSet, out_size: tuple[int, int],
                device: str = "cpu") -> tuple[torch.Tensor, None]:
        """(maps, global outputs) on the host, computed on the decoder's device (``device`` unused)."""
        dev = next(self.decoder.parameters(), torch.zeros(())).device  # the decoder's own device
        x, _ = fs.batch(torch.arange(fs.feats.shape[0]), self.cls_concat)
        maps, _ = self.decoder(x.to(dev), out_size, fs.valid_frac)
        return maps.cpu(), None


def score_group(loader: SceneLoader, group: tuple[str, ...], tasks: dict[str, ProbeTask],
                stream: FeatureStream, fits: dict[str, LinearShortcut | DecoderReadout],
                protocol: ProbeProtocol, desc: str = "test") -> tuple[dict, StageTimes]:
    """Stream the test split of one group through the fitted read-outs into each task's evaluator.

    Args:
        fits: ``{task: read-out}`` of the group's tasks to score (all or some of them): a
            :class:`~benchmarks.probe.readout.shortcut.LinearShortcut` or a :class:`DecoderReadout`.

    Returns:
        (``{task: evaluator}`` holding the whole split on every rank, stage times of this rank).
    """
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    times = StageTimes()
    evaluators = {t: tasks[t].make_evaluator() for t in group if t in fits}
    device = getattr(stream, "device", "cpu")  # the read-out's products run where the backbone ran
    keys = group[:1] if stream.shared else tuple(evaluators)
    bar = tqdm(total=loader.num_samples(group), desc=desc, unit="img", disable=rank != 0, leave=False,
               mininterval=1.0)
    t_data = time.perf_counter()
    for batch in loader.batches(group, rank, world):
        t0 = time.perf_counter()
        times.data_s += t0 - t_data
        feats = {k: stream(batch, tasks[k]) for k in keys}
        t1 = time.perf_counter()
        times.forward_s += t1 - t0
        for t in evaluators:
            fs = feats[keys[0] if stream.shared else t]
            geom = ReadoutGeometry.of(tasks[t], fs, protocol)
            maps, glob = fits[t].outputs(fs, geom.out_size, device)
            tasks[t].update_evaluator(evaluators[t], maps, glob, batch.targets[t], batch.index)
        times.test_s += time.perf_counter() - t1
        bar.update(len(batch.positions) * world)
        t_data = time.perf_counter()
    bar.close()
    if world > 1:
        t0 = time.perf_counter()
        for ev in evaluators.values():
            ev.sync()
        times.test_s += time.perf_counter() - t0
    return evaluators, times
