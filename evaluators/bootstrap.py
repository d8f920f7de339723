"""Fixed-seed percentile bootstrap over test images, vectorised over the resamples.

A resample draws ``n`` of the ``n`` test images with replacement:
``idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))``, row ``r`` being the
images of resample ``r`` (positions in the evaluator's canonical image order: ascending dataset
index, or ascending image id for pose). A metric that is a function of per-image sums is
recomputed from ``counts @ rows`` (``counts[r, i]``: how often image ``i`` was drawn), one matrix
product for all resamples. The interval is the percentile interval of the resampled values:
``np.nanpercentile(values, [100 (1 - level) / 2, 100 (1 + level) / 2])`` with NumPy's default
(linear) interpolation; a resample whose metric is undefined (NaN, e.g. no scored pixel) is left out.

Example:
    >>> idx = resample_indices(4, resamples=3, seed=0)
    >>> idx.shape, resample_counts(idx, 4).sum(1).tolist()
    ((3, 4), [4.0, 4.0, 4.0])
    >>> percentile_interval(np.arange(101.0), 0.5)
    (25.0, 75.0)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from sapiens2.tasks import get_task, task_names


def resample_indices(n: int, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """``resamples x n`` int64 image positions drawn with replacement (fixed seed).

    Raises:
        ValueError: ``n < 1`` or ``resamples < 1``.
    """
    if n < 1:
        raise ValueError("bootstrap: no test image to resample (n = 0)")
    if resamples < 1:
        raise ValueError(f"bootstrap: resamples must be >= 1, got {resamples}")
    return np.random.default_rng(seed).integers(0, n, size=(int(resamples), int(n)), dtype=np.int64)


def resample_counts(idx: np.ndarray, n: int) -> np.ndarray:
    """``R x n`` float64 draw counts of each image in each resample (rows sum to ``idx.shape[1]``)."""
    r = idx.shape[0]
    flat = (idx + np.arange(r, dtype=np.int64)[:, None] * n).ravel()
    return np.bincount(flat, minlength=r * n).reshape(r, n).astype(np.float64)


def weighted_sums(counts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``R x ...`` sums of the per-image ``rows`` (``n x ...``) weighted by ``counts`` (``R x n``)."""
    n = rows.shape[0]
    flat = np.asarray(rows, dtype=np.float64).reshape(n, -1)
    return (counts @ flat).reshape(counts.shape[0], *rows.shape[1:])


def check_level(level: float) -> None:
    """Raise a ValueError unless ``0 < level < 1``."""
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"bootstrap: level must be in (0, 1), got {level}")


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """``(low, high)`` percentile interval of the finite-or-inf resampled values (NaN skipped).

    Returns ``(nan, nan)`` when every value is NaN.
    """
    check_level(level)
    v = np.asarray(values, dtype=np.float64)
    if np.isnan(v).all():
        return (float("nan"), float("nan"))
    lo, hi = np.nanpercentile(v, [50.0 * (1.0 - level), 50.0 * (1.0 + level)])
    return (float(lo), float(hi))


def resolve_metrics(metrics: Iterable[str] | str | None, default: list[str], supported: Iterable[str],
                    owner: str) -> list[str]:
    """The requested metric keys (``default`` for None), each checked against ``supported``.

    Raises:
        KeyError: a key the evaluator cannot bootstrap, naming the supported ones.
    """
    keys = list(default) if metrics is None else ([metrics] if isinstance(metrics, str) else list(metrics))
    sup = list(supported)
    bad = [k for k in keys if k not in sup]
    if bad:
        raise KeyError(f"{owner}.bootstrap_intervals: cannot bootstrap {bad}; supported keys: {sup}")
    return keys


class BootstrapMixin:
    """Per-sample rows and the bootstrap methods of :class:`evaluators.base.Evaluator`.

    A subclass lists the states it keeps per sample in ``bootstrap_states``, declares the
    ``compute()`` keys it can resample ``bootstrapped`` (:mod:`evaluators.metric_decl`; listed by
    ``bootstrap_keys``), and implements ``_bootstrap_values`` (its ``compute_from_state`` on
    ``R x ...`` NumPy states).
    """

    def sample_rows(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Per-sample rows of the ``bootstrap_states`` of every counted sample, in canonical order.

        Canonical order: ascending dataset index, then the samples added without ``index`` in the
        order they were counted (``self`` before a merged ``other``, lower rank first). N processes
        and one process give the same rows in the same order.

        Returns:
            (dataset indices, -1 for unindexed samples; ``{state: n x ...}`` NumPy rows).
        """
        kidx, krows = self._kept_cat()
        tidx = self._tail_idx.cpu()
        idx = torch.cat([kidx, tidx])
        rows = {k: torch.cat([krows[k], self._tail_rows(k).cpu().to(krows[k].dtype)]) for k in krows}
        key = torch.where(idx < 0, torch.iinfo(torch.int64).max, idx)
        order = torch.sort(key, stable=True).indices
        return idx[order].numpy(), {k: v[order].numpy() for k, v in rows.items()}

    def bootstrap_image_ids(self) -> np.ndarray:
        """The ids of the test images the bootstrap resamples, in its canonical order.

        Position ``i`` of a resample (:func:`resample_indices`) is image ``bootstrap_image_ids()[i]``,
        so two evaluators with equal ids draw the same images for the same seed (a paired bootstrap).
        Here: the dataset indices of :meth:`sample_rows` (-1 for samples added without ``index``).
        """
        return self.sample_rows()[0]

    @property
    def num_images(self) -> int:
        """n: the number of test images (samples) the bootstrap resamples."""
        return int(self.state()["num_samples"])

    def default_bootstrap_metrics(self) -> list[str]:
        """The task's headline metric (``sapiens2.tasks``), else every supported key."""
        if self.task in task_names():
            return [get_task(self.task).headline]
        return list(self.bootstrap_keys)

    def bootstrap_distribution(
        self, metrics: list[str] | None = None, *, resamples: int = 1000, seed: int = 0
    ) -> dict[str, np.ndarray]:
        """The metrics recomputed on each of ``resamples`` resamples of the test images.

        Two evaluators over the same test images (same n, same canonical order) get the same
        resamples for the same seed, so their differences can be bootstrapped paired.

        Returns:
            ``{key: float64 array of length resamples}``.
        """
        owner = type(self).__name__
        keys = resolve_metrics(metrics, self.default_bootstrap_metrics(), self.bootstrap_keys, owner)
        _, rows = self.sample_rows()
        n = next(iter(rows.values())).shape[0] if rows else 0
        idx = resample_indices(n, resamples, seed)
        return self._bootstrap_values(self._resampled_states(resample_counts(idx, n), rows), keys)

    def bootstrap_intervals(
        self,
        metrics: list[str] | None = None,
        *,
        resamples: int = 1000,
        level: float = 0.95,
        seed: int = 0,
    ) -> dict[str, tuple[float, float]]:
        """Percentile-bootstrap ``level`` intervals over test images (see :mod:`evaluators.bootstrap`).

        Args:
            metrics: ``compute()`` keys (None: the task's headline metric).
            resamples: number of resamples.
            level: coverage of the interval.
            seed: seed of ``np.random.default_rng``.

        Returns:
            ``{key: (low, high)}``.

        Raises:
            KeyError: a key this evaluator cannot bootstrap.
            ValueError: no sample, or a bad ``level``/``resamples``.
        """
        check_level(level)
        dist_ = self.bootstrap_distribution(metrics, resamples=resamples, seed=seed)
        return {k: percentile_interval(v, level) for k, v in dist_.items()}

    def _resampled_states(self, counts: np.ndarray, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``R x ...`` states: count-weighted sums of the rows of sum states; the dataset value otherwise."""
        full = self.state()
        out = {}
        for k in self._reduce:
            if k in rows and self._reduce[k] == "sum":
                out[k] = weighted_sums(counts, rows[k])
            else:
                v = full[k].detach().cpu().to(torch.float64).numpy()
                out[k] = np.broadcast_to(v, (counts.shape[0], *v.shape))
        return out

    def _bootstrap_values(self, s: dict[str, np.ndarray], keys: list[str]) -> dict[str, np.ndarray]:
        """Vectorised ``compute_from_state`` on ``R x ...`` states, for ``keys`` (subclasses)."""
        raise KeyError(f"{type(self).__name__} keeps no per-sample statistics for a bootstrap")

