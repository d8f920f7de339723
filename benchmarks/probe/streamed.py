"""Prototype of the streamed probe spine: data -> features -> statistics -> solve -> test -> evaluators.

The closed-form linear read-out (every task's ``decoder="linear"``) without holding any split in
memory: per scene group (:mod:`benchmarks.probe.loader`) one pass over the train batches folds each
batch's features (:mod:`benchmarks.probe.stream`) into the read-out's sufficient statistics
(:class:`~benchmarks.probe.ridge.RidgeStats` per task and one shared ``x^T x`` per fold, the tasks of
a group sharing their features); the penalty is chosen on the held-out fold and the map refit on all
train images from the same sums (:func:`~benchmarks.probe.ridge.fit_ridge`); then one pass over the
test batches feeds every task's evaluator. What stays in memory: the statistics (sizes set by the
feature width and the outputs, not by the images), the pooled vectors of the global branch (one
row per image) and the evaluators' per-image rows the bootstrap needs.

It calls the public functions of :mod:`benchmarks.probe.shortcut`, :mod:`benchmarks.probe.ridge` and
the tasks unchanged, so its results equal today's path to float tolerance
(tests/test_probe_streamed.py). Not wired into ``run_probe`` yet. Under torch.distributed the test
pass is sharded and its evaluator states reduced; the train pass still runs whole on every rank (its
sums are not all-reduced yet).
"""

from __future__ import annotations

import time

import torch

from benchmarks.probe.evaluate import bootstrap_intervals_field
from benchmarks.probe.headline import interval_metrics
from benchmarks.probe.loader import SceneLoader
from benchmarks.probe.ridge import RidgeStats, fit_ridge, fit_ridge_dual
from benchmarks.probe.shortcut import LinearShortcut, holdout_fold, shortcut_factor, to_grid
from benchmarks.probe.stream import feature_stream
from benchmarks.probe.train import build_decoder, forward
from evaluators.runner import run_evaluation
from sapiens2 import distributed as dist_utils


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


class _TaskStats:
    """One task's read-out statistics: the spatial RidgeStats and the global branch's rows."""

    def __init__(self, task, protocol, fs, shift, product_dtype):
        self.task = task
        stride = min(protocol.task(task.name).output_stride, fs.patch_size)
        self.r = shortcut_factor(fs.patch_size, stride)
        self.out_size = task.output_size(fs.image_size, stride)
        c = fs.feats.shape[1]
        self.stats = RidgeStats(c, task.out_channels * self.r**2, shift=shift, product_dtype=product_dtype)
        self.pooled: list[torch.Tensor] = []
        self.glob: list[torch.Tensor] = []

    def update(self, fs, tgt: dict, fold_of_image: torch.Tensor, protocol) -> None:
        gh, gw = fs.feats.shape[-2:]
        y = to_grid(self.task.linear_targets(tgt), (gh, gw), self.r, self.out_size, fs.valid_frac)
        for k in (0, 1):
            sel = torch.nonzero(fold_of_image == k).flatten()
            if len(sel):
                self.stats.update(_rows(fs.feats[sel].float()), _rows(y[sel]), fold=k, gram=False)
        if self.task.global_channels:
            self.pooled.append(fs.batch(torch.arange(fs.feats.shape[0]), protocol.cls_concat)[1].double())
            self.glob.append(self.task.global_targets(tgt).double())

    def solve(self, grams: list[torch.Tensor], protocol) -> LinearShortcut:
        for k, xx in enumerate(grams):
            if self.stats.folds[k].n:
                self.stats.set_gram(k, xx)
        fit = fit_ridge(self.stats, protocol.ridge_alphas)
        global_fit = None
        if self.task.global_channels:
            x = torch.cat(self.pooled).float()
            global_fit = fit_ridge_dual(x, torch.cat(self.glob).float(), protocol.ridge_alphas)
        return LinearShortcut(fit, self.r, self.task.out_channels, global_fit)


class _Gram:
    """``x^T x`` per fold of one feature stream, about a fixed shift, products in ``product_dtype``."""

    def __init__(self, fs, product_dtype, shift: torch.Tensor | None = None):
        self.shift = fs.feats.double().mean(dim=(0, 2, 3)) if shift is None else shift
        self.product_dtype = product_dtype
        c = fs.feats.shape[1]
        self.xx = [torch.zeros(c, c, dtype=torch.float64) for _ in range(2)]

    def update(self, fs, fold_of_image: torch.Tensor) -> None:
        for k in (0, 1):
            sel = torch.nonzero(fold_of_image == k).flatten()
            if len(sel):
                x = (_rows(fs.feats[sel].double()) - self.shift).to(self.product_dtype)
                self.xx[k] += (x.T @ x).double()


def _split_means(loader, group, store, protocol, oracle) -> dict[str, torch.Tensor]:
    """Channel mean of the train features per feature stream (one extra pass over the features)."""
    sums: dict[str, list] = {}
    for fb in feature_stream(loader, group, store, protocol, oracle_tasks=oracle, targets=False):
        for t in group if store is None else group[:1]:
            f = fb.features[t].feats.double()
            key = t if store is None else "shared"
            s, c = sums.get(key, (0.0, 0))
            sums[key] = (s + f.sum(dim=(0, 2, 3)), c + f.shape[0] * f.shape[2] * f.shape[3])
    return {k: s / c for k, (s, c) in sums.items()}


def fit_streamed(
    loader: SceneLoader, group, store, tasks: dict, protocol, shift: str = "split-mean"
) -> dict[str, LinearShortcut]:
    """Every task's fitted linear read-out from the train batches of ``group``.

    Args:
        loader: the train split's :class:`~benchmarks.probe.loader.SceneLoader`.
        group: one of its groups.
        store: the :class:`~benchmarks.probe.features.FeatureStore` (None: the oracle).
        tasks: ``{name: ProbeTask}`` (at least the group's).
        protocol: the protocol (``ridge_*`` knobs).
        shift: what the statistics are shifted by: ``"split-mean"`` (the train features' channel
            mean, as today's path: one extra pass over the features, from the disk cache when the
            store has one) or ``"first-batch"`` (the first batch's mean: one pass; the same sums up
            to rounding, which the oracle's near-singular fit at the smallest penalty amplifies:
            up to 1e-4 relative in its seg/normal/pointmap metrics on the toy split).
    """
    if shift not in ("split-mean", "first-batch"):
        raise ValueError(f"fit_streamed: shift must be 'split-mean' or 'first-batch', got {shift!r}")
    n = loader.num_samples(group)
    folds = holdout_fold(n, protocol.ridge_holdout_every)
    product_dtype = getattr(torch, protocol.ridge_product_dtype)
    grams: dict[str, _Gram] = {}
    stats: dict[str, _TaskStats] = {}
    oracle = {t: tasks[t] for t in group} if store is None else None
    means = _split_means(loader, group, store, protocol, oracle) if shift == "split-mean" else {}
    for fb in feature_stream(loader, group, store, protocol, oracle_tasks=oracle):
        f_img = folds[fb.batch.positions]
        for t in group:
            fs = fb.features[t]
            gkey = t if store is None else "shared"  # the oracle's features differ per task
            if gkey not in grams:
                grams[gkey] = _Gram(fs, product_dtype, means.get(gkey))
            if t not in stats:
                stats[t] = _TaskStats(tasks[t], protocol, fs, grams[gkey].shift, product_dtype)
            if gkey == t or t == group[0]:
                grams[gkey].update(fs, f_img)
            stats[t].update(fs, fb.batch.targets[t], f_img, protocol)
    return {t: stats[t].solve(grams[t if store is None else "shared"].xx, protocol) for t in group}


def evaluate_streamed(loader: SceneLoader, group, store, tasks: dict, shortcuts: dict, protocol) -> dict:
    """One pass over the test batches of ``group``: every task's metrics and bootstrap intervals.

    Under torch.distributed each rank feeds its share of the batches and the evaluator states are
    reduced, as :func:`~benchmarks.probe.evaluate.evaluate_decoder` does.

    Returns:
        ``{task: {"metrics", "intervals", "eval_s"}}``.
    """
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    evaluators = {t: tasks[t].make_evaluator() for t in group}
    decoders: dict = {}
    oracle = {t: tasks[t] for t in group} if store is None else None

    def feed(evs, fb):
        for t in group:
            fs = fb.features[t]
            if t not in decoders:
                decoders[t] = build_decoder(tasks[t], fs, protocol, 0, shortcut=shortcuts[t]).eval()
            maps, glob = forward(decoders[t], tasks[t], fs, torch.arange(len(fb)), protocol)
            tasks[t].update_evaluator(evs[t], maps, glob, fb.batch.targets[t], fb.batch.index)

    stream = feature_stream(loader, group, store, protocol, oracle_tasks=oracle, rank=rank, world=world)
    with torch.no_grad():
        res = run_evaluation(evaluators, stream, feed, sync=world > 1)
    out = {}
    for t in group:
        t0 = time.perf_counter()
        intervals = bootstrap_intervals_field(
            evaluators[t],
            interval_metrics(t, evaluators[t]),
            resamples=protocol.bootstrap_resamples,
            level=protocol.interval_level,
            seed=protocol.bootstrap_seed,
        )
        out[t] = {
            "metrics": res.metrics[t],
            "intervals": intervals,
            "eval_s": res.seconds + time.perf_counter() - t0,
        }
    return out


def streamed_linear_probe(
    source,
    tasks: dict,
    protocol,
    store=None,
    batch_size: int = 8,
    num_workers: int = 0,
    shift: str = "split-mean",
    eval_batch_size: int = 8,
) -> dict[str, dict]:
    """The closed-form linear probe of ``tasks``, streamed (see the module docstring).

    Args:
        source: a data folder or :class:`~benchmarks.probe.data.MemoryData`.
        tasks: ``{name: ProbeTask}``; every task's decoder must be ``"linear"``.
        protocol: the protocol.
        store: the backbone's :class:`~benchmarks.probe.features.FeatureStore` (best with
            ``keep_in_memory=False``), or None for the ground-truth oracle.
        batch_size: scenes per train batch.
        num_workers: DataLoader workers reading the samples.
        eval_batch_size: scenes per test batch (8, as ``evaluate_decoder``: the float32 evaluators'
            sums, e.g. the pointmap's, round differently with other batches: 6e-4 relative on the
            oracle's near-zero errors).
        shift: the statistics' shift (:func:`fit_streamed`).

    Returns:
        ``{task: {"metrics", "intervals", "shortcut" (its describe()), "fit_s", "eval_s"}}``.
    """
    bad = [t for t in tasks if protocol.task(t).decoder != "linear"]
    if bad:
        raise ValueError(f"streamed probe: only the 'linear' decoder streams yet; {bad} use another")
    train = SceneLoader(
        source, tasks, protocol.train_split, protocol, batch_size, num_workers, protocol.max_train_samples
    )
    test = SceneLoader(
        source, tasks, protocol.test_split, protocol, eval_batch_size, num_workers, protocol.max_test_samples
    )
    shortcuts, fit_s = {}, {}
    for group in train.groups:
        t0 = time.perf_counter()
        shortcuts.update(fit_streamed(train, group, store, tasks, protocol, shift))
        fit_s.update(dict.fromkeys(group, time.perf_counter() - t0))
    out: dict[str, dict] = {}
    for group in test.groups:
        res = evaluate_streamed(test, group, store, tasks, shortcuts, protocol)
        for t in group:
            out[t] = {**res[t], "shortcut": shortcuts[t].describe(), "fit_s": fit_s[t]}
    return out
