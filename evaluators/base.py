"""The evaluator contract: mergeable sufficient statistics, keyed by dataset index.

An :class:`Evaluator` holds named tensor states (sums, histograms, confusion matrices) registered
with :meth:`Evaluator.add_state` and a reduce op (``sum``, ``max`` or ``min``). A subclass turns a
batch into per-sample statistics (``batch_stats`` returns, for every state, a tensor whose first
dimension is the batch) and turns the reduced states into metrics (``compute_from_state``).

Dedup by dataset index. ``update(..., index=idx)`` keys each sample by its dataset index:

* a sample whose index was already counted (on this evaluator) is ignored;
* within a batch the first occurrence of an index wins;
* the samples of the most recent ``update`` stay as per-sample rows (the *tail*) until the next
  ``update`` commits them into the states. ``DistributedSampler`` (and mmengine's
  ``DefaultSampler``) pad the index list by repeating its first indices, so each padded duplicate
  is the *last* sample of some rank: it is always in that rank's tail.
* ``merge(other)`` / ``sync()``: committed index sets must be disjoint (else a ``ValueError``);
  a tail row is dropped when its index is committed anywhere, or kept by an earlier evaluator
  (``self`` before ``other``; lower rank before higher rank). Every sample therefore counts once,
  and N processes give the single-process states: integer states exactly, float64 sums up to the
  summation order.

Without ``index`` samples are committed at once and never deduplicated.

Example:
    >>> import torch
    >>> class CountPixels(Evaluator):
    ...     task = "demo"
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.add_state("pixels", torch.zeros((), dtype=torch.int64))
    ...     def batch_stats(self, mask):
    ...         return {"pixels": mask.flatten(1).sum(1)}
    ...     def compute_from_state(self, s):
    ...         return {"pixels": float(s["pixels"])}
    >>> a, b = CountPixels(), CountPixels()
    >>> a.update(torch.ones(2, 4, 4, dtype=torch.bool), index=[0, 1])
    >>> b.update(torch.ones(2, 4, 4, dtype=torch.bool), index=[2, 0])  # index 0 padded in again
    >>> a.merge(b).compute()["pixels"], a.compute()["num_samples"]
    (48.0, 3.0)
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from evaluators.bootstrap import BootstrapMixin
from evaluators.metric_decl import FieldValue, MetricDecl, count_decl, expand_decls
from sapiens2 import distributed as D

REDUCE_OPS = ("sum", "max", "min")
#: what every evaluator's ``compute()`` reports besides its own metrics
COMMON_METRICS = (count_decl("num_samples", "samples"),)


def _reduce_rows(rows: torch.Tensor, op: str) -> torch.Tensor:
    if op == "sum":
        return rows.sum(0)
    if op == "max":
        return rows.amax(0)
    return rows.amin(0)


def _combine(a: torch.Tensor, b: torch.Tensor, op: str) -> torch.Tensor:
    if op == "sum":
        return a + b
    if op == "max":
        return torch.maximum(a, b)
    return torch.minimum(a, b)


def as_index_tensor(index: Any, batch: int) -> torch.Tensor:
    """Convert ``index`` (list, ndarray, tensor) to an int64 CPU tensor of length ``batch``.

    Raises:
        ValueError: wrong length, not integer, or negative.
    """
    if isinstance(index, torch.Tensor):
        idx = index.detach().to("cpu")
    else:
        idx = torch.as_tensor(np.asarray(index))
    if idx.dim() != 1 or idx.numel() != batch:
        raise ValueError(
            f"index: expected {batch} dataset indices (one per sample), got shape {tuple(idx.shape)}"
        )
    if idx.is_floating_point() or idx.dtype == torch.bool:
        raise ValueError(f"index: expected integer dataset indices, got dtype {idx.dtype}")
    idx = idx.to(torch.int64)
    if idx.numel() and int(idx.min()) < 0:
        raise ValueError("index: dataset indices must be >= 0")
    return idx


def _zero_rows(default: torch.Tensor, n: int) -> torch.Tensor:
    return default.new_zeros((n, *default.shape))


class Evaluator(BootstrapMixin):
    """Base class of the streaming, mergeable evaluators (see the module docstring).

    Subclasses call :meth:`add_state` in ``__init__``, set ``self.conventions``, declare their
    metrics in ``metrics`` (:mod:`evaluators.metric_decl`; templates get their values from
    :meth:`metric_fields`) and implement ``batch_stats(*args, **kwargs) -> dict[str, Tensor]``
    (per-sample rows, first dim = batch) and ``compute_from_state(state) -> dict[str, float]``.

    Attributes:
        task: task name recorded with every result.
        conventions: the conventions the numbers follow (pooling, thresholds, NaN policy, ...);
            copied into every :meth:`compute` result under ``"conventions"``.
    """

    task: str = ""
    #: the metrics ``compute()`` reports, declared once (:mod:`evaluators.metric_decl`)
    metrics: tuple[MetricDecl, ...] = ()
    #: states also kept per sample (committed rows), for :meth:`bootstrap_intervals`
    bootstrap_states: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._defaults: dict[str, torch.Tensor] = {}
        self._reduce: dict[str, str] = {}
        self.conventions: dict[str, Any] = {}
        self.device = torch.device("cpu")
        self.add_state("num_samples", torch.zeros((), dtype=torch.int64))
        self.reset()

    # ------------------------------------------------------------------ declared metrics
    def metric_fields(self) -> dict[str, tuple[FieldValue, ...]]:
        """The values of the template fields of ``metrics`` under this evaluator's settings (none here)."""
        return {}

    def declared_metrics(self) -> tuple[MetricDecl, ...]:
        """The concrete metrics this evaluator computes (its ``metrics`` expanded, plus ``num_samples``)."""
        fields = self.metric_fields()
        return expand_decls((*type(self).metrics, *COMMON_METRICS), fields, lambda n: bool(getattr(self, n)))

    @property
    def bootstrap_keys(self) -> tuple[str, ...]:
        """``compute()`` keys :meth:`bootstrap_intervals` can resample (the declared ``bootstrapped``)."""
        return tuple(d.key for d in self.declared_metrics() if d.bootstrapped)

    # ------------------------------------------------------------------ states
    def add_state(self, name: str, default: torch.Tensor, reduce: str = "sum") -> None:
        """Register a named tensor state.

        Args:
            name: state name (also the key ``batch_stats`` returns for it).
            default: initial value (its shape and dtype are the state's).
            reduce: how states combine across samples, evaluators and ranks: sum, max or min.
        """
        if reduce not in REDUCE_OPS:
            raise ValueError(f"state {name!r}: reduce must be one of {REDUCE_OPS}, got {reduce!r}")
        self._defaults[name] = default.detach().clone()
        self._reduce[name] = reduce
        if hasattr(self, "_state"):
            self._state[name] = default.detach().clone().to(self.device)

    def reset(self) -> None:
        """Forget every sample: states back to their defaults, no index seen."""
        self._state = {k: v.clone().to(self.device) for k, v in self._defaults.items()}
        self._seen = torch.zeros(0, dtype=torch.bool)  # bitmap of committed dataset indices
        self._tail_idx = torch.zeros(0, dtype=torch.int64)
        self._tail: dict[str, torch.Tensor] = {}
        self._kept: list[tuple[torch.Tensor, dict[str, torch.Tensor]]] = []  # (index or -1, rows)
        self._synced = False

    def to(self, device: str | torch.device) -> Evaluator:
        """Move the states (and future computation) to ``device``; returns ``self``."""
        self.device = torch.device(device)
        self._state = {k: v.to(self.device) for k, v in self._state.items()}
        self._tail = {k: v.to(self.device) for k, v in self._tail.items()}
        return self

    def state(self) -> dict[str, torch.Tensor]:
        """The reduced states over every counted sample (committed plus tail), as new tensors."""
        out = {}
        for k, v in self._state.items():
            if k in self._tail and self._tail[k].shape[0]:
                out[k] = _combine(v, _reduce_rows(self._tail[k], self._reduce[k]), self._reduce[k])
            else:
                out[k] = v.clone()
        return out

    def seen_indices(self) -> torch.Tensor:
        """Sorted dataset indices counted so far (committed and tail)."""
        return torch.cat([self._seen.nonzero().flatten(), self._tail_idx]).unique()

    # ------------------------------------------------------------------ subclass API
    def batch_stats(self, *args, **kwargs) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute_from_state(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ update / compute
    def update(self, *args, index: Sequence[int] | torch.Tensor | None = None, **kwargs) -> None:
        """Add a batch.

        Args:
            *args: task inputs (see the subclass's ``batch_stats``).
            index: optional dataset index of each sample, for dedup (see the module docstring).
            **kwargs: task inputs by name.
        """
        if self._synced:
            raise RuntimeError(
                f"{type(self).__name__}: update() after sync(); the state is global now, call reset() first"
            )
        stats = self.batch_stats(*args, **kwargs)
        self.add_rows(stats, index)

    def add_rows(self, stats: dict[str, torch.Tensor], index=None) -> None:
        """Add per-sample statistic rows (first dim = batch) under the dedup rules."""
        stats = dict(stats)
        batch = self._check_rows(stats)
        if batch == 0:
            return
        any_row = next(iter(stats.values()))
        if any_row.device != self.device:
            self.to(any_row.device)
        stats = {k: v.to(self.device, self._defaults[k].dtype) for k, v in stats.items()}
        stats["num_samples"] = torch.ones(batch, dtype=torch.int64, device=self.device)
        if index is None:
            self._keep_rows(torch.full((batch,), -1, dtype=torch.int64), stats)
            self._commit_rows(stats)
            return
        idx = as_index_tensor(index, batch)
        keep = self._first_occurrence(idx) & ~self._is_counted(idx)
        self._commit_tail()
        sel = keep.nonzero().flatten()
        self._tail_idx = idx[sel]
        self._tail = {k: v[sel.to(v.device)] for k, v in stats.items()}

    def compute(self) -> dict[str, Any]:
        """Metrics over every counted sample: official names -> float, plus ``conventions``."""
        state = self.state()
        out = dict(self.compute_from_state(state))
        out["num_samples"] = float(state["num_samples"])
        out["conventions"] = copy.deepcopy(self.conventions)
        return out

    # ------------------------------------------------------------------ merge / sync
    def merge(self, other: Evaluator) -> Evaluator:
        """Fold ``other``'s samples into ``self`` (each dataset index counted once); returns ``self``.

        Raises:
            TypeError: ``other`` is another evaluator type or has other states.
            ValueError: conventions differ, or both committed the same dataset index.
        """
        if type(other) is not type(self) or other._reduce != self._reduce:
            raise TypeError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        if other.conventions != self.conventions:
            raise ValueError(f"{type(self).__name__}.merge: evaluators use different conventions")
        if self._synced or other._synced:
            raise RuntimeError("merge(): an operand was already synced across ranks")
        ov = self._overlap(self._seen, other._seen)
        if ov.numel():
            raise ValueError(f"merge: dataset indices counted by both evaluators: {ov[:10].tolist()}")
        for k, op in self._reduce.items():
            self._state[k] = _combine(self._state[k], other._state[k].to(self.device), op)
        self._seen = self._union(self._seen, other._seen)
        self._kept = self._kept + list(other._kept)
        tails_idx = [self._tail_idx, other._tail_idx]
        tails = [self._tail, {k: v.to(self.device) for k, v in other._tail.items()}]
        self._set_tail_from(tails_idx, tails)
        return self

    def sync(self) -> None:
        """Reduce the states over all ranks in place (no-op on one process).

        Committed states are all-reduced with their reduce op, committed index sets and tail rows
        are all-gathered and deduplicated with the rules of :meth:`merge` (lower rank first).
        Afterwards every rank holds the global state; ``update`` then needs ``reset`` first.
        """
        if self._synced or not D.is_distributed():
            return
        committed = self._seen.nonzero().flatten()
        parts = D.all_gather_varlen(committed)
        total = sum(p.numel() for p in parts)
        union = torch.cat(parts).unique() if parts else committed
        if union.numel() != total:
            raise ValueError("sync: some dataset indices were committed on more than one rank")
        for k, op in self._reduce.items():
            D.all_reduce_(self._state[k], op)
        self._seen = torch.zeros(int(union.max()) + 1 if union.numel() else 0, dtype=torch.bool)
        self._seen[union] = True
        if self.bootstrap_states:
            kidx, krows = self._kept_cat()
            gidx = D.all_gather_varlen(kidx)
            grows = {k: D.all_gather_varlen(v) for k, v in sorted(krows.items())}
            self._kept = [(gidx[r], {k: grows[k][r] for k in grows}) for r in range(len(gidx))]
        tails_idx = D.all_gather_varlen(self._tail_idx)
        names = sorted(self._reduce)
        gathered = {k: D.all_gather_varlen(self._tail_rows(k)) for k in names}
        tails = [{k: gathered[k][r] for k in names} for r in range(len(tails_idx))]
        self._set_tail_from(tails_idx, tails)
        self._synced = True

    # ------------------------------------------------------------------ internals
    def _tail_rows(self, k: str) -> torch.Tensor:
        if k in self._tail:
            return self._tail[k]
        d = self._defaults[k]
        return torch.zeros((0, *d.shape), dtype=d.dtype, device=self.device)

    def _set_tail_from(self, tails_idx: list[torch.Tensor], tails: list[dict[str, torch.Tensor]]) -> None:
        """Keep the tail rows not committed anywhere, first holder wins; they form the new tail."""
        kept_idx, kept = [], {k: [] for k in self._reduce}
        taken = torch.zeros(0, dtype=torch.int64)
        for idx, rows in zip(tails_idx, tails):
            if idx.numel() == 0:
                continue
            keep = ~self._is_committed(idx) & ~torch.isin(idx, taken)
            sel = keep.nonzero().flatten()
            kept_idx.append(idx[sel])
            taken = torch.cat([taken, idx[sel]])
            for k in self._reduce:
                r = rows[k] if k in rows else self._tail_rows(k)[:0]
                kept[k].append(r[sel.to(r.device)])
        self._tail_idx = torch.cat(kept_idx) if kept_idx else torch.zeros(0, dtype=torch.int64)
        self._tail = {k: torch.cat(v) for k, v in kept.items() if v}

    def _commit_rows(self, rows: dict[str, torch.Tensor]) -> None:
        for k, v in rows.items():
            if v.shape[0]:
                red = _reduce_rows(v.to(self._state[k].dtype), self._reduce[k])
                self._state[k] = _combine(self._state[k], red, self._reduce[k])

    def _keep_rows(self, idx: torch.Tensor, rows: dict[str, torch.Tensor]) -> None:
        if self.bootstrap_states and idx.numel():
            n = idx.numel()
            kept = {
                k: rows[k].detach().cpu() if k in rows else _zero_rows(self._defaults[k], n)
                for k in self.bootstrap_states
            }
            self._kept.append((idx.cpu(), kept))

    def _kept_cat(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Committed per-sample rows: (indices, -1 for unindexed samples; rows per bootstrap state)."""
        idx = [i for i, _ in self._kept]
        rows = {
            k: torch.cat([r[k] for _, r in self._kept] or [self._tail_rows(k)[:0].cpu()])
            for k in self.bootstrap_states
        }
        return (torch.cat(idx) if idx else torch.zeros(0, dtype=torch.int64)), rows

    def _commit_tail(self) -> None:
        if self._tail_idx.numel():
            self._keep_rows(self._tail_idx, self._tail)
            self._commit_rows(self._tail)
            self._seen = self._union_idx(self._seen, self._tail_idx)
        self._tail_idx = torch.zeros(0, dtype=torch.int64)
        self._tail = {}

    def _check_rows(self, stats: dict[str, torch.Tensor]) -> int:
        unknown = set(stats) - set(self._reduce)
        if unknown:
            raise KeyError(f"{type(self).__name__}: batch_stats returned unknown states {sorted(unknown)}")
        sizes = {k: v.shape[0] for k, v in stats.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"{type(self).__name__}: per-sample rows disagree on the batch size: {sizes}")
        for k, v in stats.items():
            if tuple(v.shape[1:]) != tuple(self._defaults[k].shape):
                raise ValueError(
                    f"{type(self).__name__}: state {k!r} rows have shape {tuple(v.shape[1:])}, "
                    f"expected {tuple(self._defaults[k].shape)}"
                )
        return next(iter(sizes.values())) if sizes else 0

    def _is_committed(self, idx: torch.Tensor) -> torch.Tensor:
        inside = idx < self._seen.numel()
        out = torch.zeros_like(idx, dtype=torch.bool)
        out[inside] = self._seen[idx[inside]]
        return out

    def _is_counted(self, idx: torch.Tensor) -> torch.Tensor:
        return self._is_committed(idx) | torch.isin(idx, self._tail_idx)

    @staticmethod
    def _first_occurrence(idx: torch.Tensor) -> torch.Tensor:
        _, inv = torch.unique(idx, return_inverse=True)
        pos = torch.arange(idx.numel())
        first = torch.full((int(inv.max()) + 1,), idx.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inv, pos, reduce="amin")
        return first[inv] == pos

    @staticmethod
    def _union_idx(bitmap: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        need = int(idx.max()) + 1 if idx.numel() else 0
        if need > bitmap.numel():
            bitmap = torch.cat([bitmap, torch.zeros(need - bitmap.numel(), dtype=torch.bool)])
        bitmap = bitmap.clone()
        bitmap[idx] = True
        return bitmap

    @classmethod
    def _union(cls, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return cls._union_idx(a, b.nonzero().flatten())

    @staticmethod
    def _overlap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        n = min(a.numel(), b.numel())
        return (a[:n] & b[:n]).nonzero().flatten()

    def __repr__(self) -> str:
        n = int(self.state()["num_samples"])
        return f"{type(self).__name__}(task={self.task!r}, samples={n})"
