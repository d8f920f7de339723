"""The dense-probing protocol as one typed config, with one hashable protocol per task.

Every knob that changes a probe's numbers lives in :class:`ProbeProtocol`. Each task has its own
protocol id: :meth:`ProbeProtocol.task_protocol` is the part of the protocol that task's numbers
depend on (the shared fields, that task's settings, and the knobs its read-out reads:
:data:`SHARED_FIELDS`, :data:`READOUT_FIELDS`, ``TaskSettings.BODY_ONLY_FIELDS``), and
:meth:`ProbeProtocol.protocol_id` hashes it (canonical JSON, SHA-256). Every result record carries
its task's id and stores that part as its ``config["protocol"]``, so results made under different
protocols are never ranked together, and a change to one task's knob leaves the other tasks' ids
(and records) as they are.

Example:
    >>> from benchmarks.probe.protocol import ProbeProtocol
    >>> p = ProbeProtocol()
    >>> p.protocol_id("seg").startswith("probe-")
    True
    >>> p.replace(tasks={"pose": {"sigma": 3.0}}).protocol_id("seg") == p.protocol_id("seg")
    True
    >>> "lr" in p.task_protocol("seg"), "lr" in body_protocol().task_protocol("seg")
    (False, True)
    >>> p.tapped_layers(12)
    [2, 5, 8, 11]
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks import probe_task_class, probe_task_names
from sapiens2.errors import UnknownNameError
from sapiens2.records.integrity import protocol_id

PROTOCOL_VERSION = 5
_DTYPE_CHOICES = {
    "feature_dtype": ("float16", "bfloat16", "float32"),
    "backbone_dtype": ("float32", "bfloat16", "float16"),
    "ridge_product_dtype": ("float32", "float64"),
}


def settings_class(name: str) -> type[TaskSettings]:
    """The settings class task ``name`` registered (``ProbeTask.settings_class``).

    Raises:
        UnknownNameError: no probe task of that name is registered.
    """
    return probe_task_class(name).settings_class


def default_task_settings(decoder: str = "linear") -> dict[str, TaskSettings]:
    """Every registered probe task's default settings (its settings class's defaults) with ``decoder``.

    ``decoder="linear"`` is the closed-form linear probe (v4's headline, nothing trained); the losses
    and the body's knobs apply to ``decoder="pixelshuffle"`` (the body-trained variant,
    :func:`body_protocol`).
    """
    return {name: settings_class(name)(decoder=decoder) for name in probe_task_names()}


def task_settings(name: str, value) -> TaskSettings:
    """Task ``name``'s settings from a settings object or a dict of its fields.

    Raises:
        UnknownNameError: an unknown task, or a key the task's settings do not have.
    """
    cls = settings_class(name)
    if isinstance(value, TaskSettings):
        if type(value) is not cls:
            raise ValueError(f"protocol.tasks[{name!r}]: expected {cls.__name__}, got {type(value).__name__}")
        return value
    if not isinstance(value, dict):
        raise ValueError(f"protocol.tasks[{name!r}]: expected a dict of settings, got {value!r}")
    return cls(**_checked_keys(value, cls, f"protocol.tasks[{name!r}] key"))


_SCALAR_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
_SCALAR_WANTED = {"int": "an integer", "float": "a finite number", "str": "a string", "bool": "true or false"}


def check_field_types(obj, where: str) -> None:
    """Every ``int``/``float``/``str``/``bool`` field of dataclass ``obj`` holds that type (a float finite),
    so ``{"lr": "fast"}`` is an error naming the setting here, not a TypeError inside the optimiser.

    Raises:
        ValueError: ``where.field: expected a number, got 'fast'``.
    """
    for f in dataclasses.fields(obj):
        kinds = _SCALAR_TYPES.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))
        value = getattr(obj, f.name)
        if kinds is None:
            continue
        ok = isinstance(value, kinds) and (f.type == "bool" or not isinstance(value, bool))
        if ok and f.type == "float" and not math.isfinite(value):
            ok = False
        if not ok:
            raise ValueError(f"{where}.{f.name}: expected {_SCALAR_WANTED[f.type]}, got {value!r}")


def _checked_keys(d: dict, cls, kind: str) -> dict:
    """``d`` with JSON lists turned back into tuples; unknown keys raise :class:`UnknownNameError`."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in d:
        if k not in fields:
            raise UnknownNameError(kind, k, sorted(fields))
    return {k: tuple(v) if isinstance(v, list) and fields[k].type == "tuple" else v for k, v in d.items()}


@dataclass(frozen=True)
class ProbeProtocol:
    """One probing protocol: everything that defines how a frozen backbone is probed.

    Args:
        input_size: (H, W) the image (pose: the top-down crop) is resized to.
        padding: ``"pad"``: zero-pad bottom/right (after normalisation) to a multiple of the patch size;
            ``"resize"``: resize to the nearest multiple instead.
        num_tapped_layers: how many blocks to tap, evenly spaced with the last one included.
        cls_concat: broadcast each tapped layer's CLS token over the grid and concatenate it (ignored
            for backbones without a CLS token; the record says so).
        decoder_channels: hidden width of the pixel-shuffle decoder.
        decoder_min_channels: narrowest upsampling stage of the pixel-shuffle decoder.
        decoder_stage_stride: the pixel-shuffle decoder's conv3x3 + PixelShuffle(2) stages stop at this
            stride; its prediction conv then emits ``out * r**2`` channels and one PixelShuffle(r) reaches
            the task's ``output_stride`` (``r = decoder_stage_stride / output_stride``).
        loss_stride: dense training losses use every ``loss_stride``-th GT pixel (predictions are
            bilinearly upsampled to the GT size and read at those pixels); evaluation uses all pixels.
        tasks: per-task settings (:class:`TaskSettings` or the task's subclass of it: decoder, output
            stride, loss and the task's own knobs, e.g. ``tasks["pose"].sigma``).
        shortcut: ``"ridge"``: every decoder starts from a linear shortcut fitted in closed form on
            the train split (:mod:`benchmarks.probe.readout.shortcut`) and the body learns the residual;
            ``"none"``: the body alone (protocol v2's decoders).
        ridge_alphas: penalty grid of the shortcut (per row, on standardised features); the train
            mean alone (an infinite penalty) is always a candidate too.
        ridge_holdout_every: train image ``i`` is held out to pick the penalty when
            ``i % ridge_holdout_every == ridge_holdout_every - 1`` (the final fit uses every image).
        optimizer: the decoder's optimiser (:data:`benchmarks.probe.train.optim.OPTIMIZERS`: ``"adamw"``,
            ``"adam"``) with ``lr``, ``betas`` and ``weight_decay``.
        schedule: the learning-rate schedule (:data:`benchmarks.probe.train.optim.SCHEDULES`):
            ``"warmup_cosine"`` (linear warm-up over ``warmup_iters``, then cosine decay to
            ``min_lr_ratio * lr`` at ``iterations``) or ``"warmup_constant"``.
        iterations: decoder training iterations.
        batch_size: global batch size (split over distributed ranks).
        grad_clip: max gradient norm.
        augmentation: ``"none"``; features are cached once per image, so no train-time augmentation.
        feature_dtype: dtype the tapped features are kept in (per batch, and in the on-disk cache):
            ``"float32"`` (the default: it holds any finite activation), or ``"bfloat16"`` /
            ``"float16"`` (half the cache; float16 overflows above 65504, an error naming the image).
        backbone_dtype: dtype the frozen backbone computes in: ``"float32"``, or ``"bfloat16"``
            (autocast: matrix products in bfloat16, norms and softmax in float32).
        ridge_product_dtype: dtype of the per-batch products of the shortcut's statistics
            (``"float64"``, or ``"float32"``: 1.8x less CPU, but it breaks the oracle's exact fit
            at the grid's smallest penalties; docs/probing.md, "Speed"), accumulated in float64.
        interval_level: confidence level of the intervals stored in every record.
        bootstrap_resamples, bootstrap_seed: the fixed-seed bootstrap over test images that gives
            those intervals.
        train_split, test_split: dataset splits used.
        max_train_samples, max_test_samples: caps on split sizes (0: all).
        holdout_every: for a single split folder, sample ``i`` is a test sample when
            ``i % holdout_every == holdout_every - 1``.
    """

    version: int = PROTOCOL_VERSION
    input_size: tuple = (256, 192)
    padding: str = "pad"
    num_tapped_layers: int = 4
    cls_concat: bool = True
    decoder_channels: int = 64
    decoder_min_channels: int = 32
    decoder_stage_stride: int = 4
    loss_stride: int = 2
    tasks: dict = field(default_factory=default_task_settings)
    shortcut: str = "ridge"
    ridge_alphas: tuple = tuple(10.0**k for k in range(-9, 4))
    ridge_holdout_every: int = 4
    optimizer: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 1e-4
    betas: tuple = (0.9, 0.999)
    schedule: str = "warmup_cosine"
    warmup_iters: int = 20
    min_lr_ratio: float = 0.01
    iterations: int = 200
    batch_size: int = 8
    grad_clip: float = 1.0
    augmentation: str = "none"
    feature_dtype: str = "float32"
    backbone_dtype: str = "bfloat16"
    ridge_product_dtype: str = "float64"
    interval_level: float = 0.95
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 0
    train_split: str = "train"
    test_split: str = "test"
    max_train_samples: int = 0
    max_test_samples: int = 0
    holdout_every: int = 4

    def __post_init__(self):
        check_field_types(self, "protocol")
        if self.padding not in ("pad", "resize"):
            raise ValueError(f"protocol.padding: expected 'pad' or 'resize', got {self.padding!r}")
        if self.augmentation != "none":
            raise ValueError(
                "protocol.augmentation: only 'none' is supported (features are cached per image)"
            )
        if len(self.input_size) != 2 or min(self.input_size) < 8:
            raise ValueError(f"protocol.input_size: expected (H, W) >= 8, got {self.input_size!r}")
        for name, ts in self.tasks.items():
            task_settings(name, ts)  # a known task with its own settings class
            check_field_types(ts, f"protocol.tasks[{name!r}]")
            if ts.masked_readout not in MASKED_READOUTS:
                raise ValueError(f"protocol.tasks[{name!r}].masked_readout: expected one of "
                                 f"{MASKED_READOUTS}, got {ts.masked_readout!r}")
            if ts.decoder not in ("linear", "pixelshuffle"):
                raise ValueError(
                    f"protocol.tasks[{name!r}].decoder: expected 'linear' or 'pixelshuffle', "
                    f"got {ts.decoder!r}"
                )
        if self.shortcut not in ("ridge", "none"):
            raise ValueError(f"protocol.shortcut: expected 'ridge' or 'none', got {self.shortcut!r}")
        if self.shortcut == "none" and any(ts.decoder == "linear" for ts in self.tasks.values()):
            raise ValueError(
                "protocol: the 'linear' decoder is the ridge shortcut; it needs shortcut='ridge'"
            )
        if not self.ridge_alphas or not all(0 < a < float("inf") for a in self.ridge_alphas):
            raise ValueError(
                f"protocol.ridge_alphas: expected positive finite values, got {self.ridge_alphas!r}"
            )
        for key, allowed in _DTYPE_CHOICES.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"protocol.{key}: expected one of {allowed}, got {getattr(self, key)!r}")
        if not 0 < self.interval_level < 1 or self.bootstrap_resamples < 1:
            raise ValueError(
                f"protocol: interval_level must be in (0, 1) and bootstrap_resamples >= 1, got "
                f"{self.interval_level!r}, {self.bootstrap_resamples!r}"
            )
        if self.batch_size < 1 or self.iterations < 1:
            raise ValueError("protocol: batch_size and iterations must be >= 1")

    def task(self, name: str) -> TaskSettings:
        """Settings of task ``name`` (KeyError naming the known tasks otherwise)."""
        if name not in self.tasks:
            raise UnknownNameError("task of the protocol", name, sorted(self.tasks))
        return self.tasks[name]

    def tapped_layers(self, num_layers: int) -> list[int]:
        """0-based block indices to tap: ``num_tapped_layers`` evenly spaced, the last one included."""
        n = max(1, min(self.num_tapped_layers, num_layers))
        return sorted({(i + 1) * num_layers // n - 1 for i in range(n)})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (tuples as lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def task_protocol(self, name: str) -> dict[str, Any]:
        """The part of the protocol task ``name``'s numbers depend on, as a JSON-ready dict.

        The shared fields (:data:`SHARED_FIELDS`), the fields the task's read-out reads
        (:data:`READOUT_FIELDS` of its decoder) and ``tasks`` holding that task's settings alone
        (without ``BODY_ONLY_FIELDS`` for the linear read-out, and without an empty vocabulary field:
        the task's default keypoint / label set). It is a valid protocol dict:
        ``ProbeProtocol.from_dict(view).task_protocol(name) == view`` (the fields left out are
        read by nothing that runs), and records store it as their ``config["protocol"]``.
        """
        settings = self.task(name)
        d = self.to_dict()
        view = {k: d[k] for k in (*SHARED_FIELDS, *READOUT_FIELDS[settings.decoder])}
        body_only = settings.BODY_ONLY_FIELDS if settings.decoder == "linear" else ()
        vocab = settings.VOCABULARY_FIELD
        left_out = (*body_only, vocab) if vocab and not getattr(settings, vocab) else body_only
        if not settings.masked_readout:  # a task that is not masked: its ids never carried the field
            left_out = (*left_out, "masked_readout")
        view["tasks"] = {name: {k: v for k, v in d["tasks"][name].items() if k not in left_out}}
        return view

    def protocol_id(self, task: str) -> str:
        """``probe-v<version>-<12 hex>``: SHA-256 of the canonical JSON of :meth:`task_protocol`.

        The formula lives in :func:`sapiens2.records.integrity.protocol_id`, which record validation uses
        to check the id a record stores against the protocol dict in its config.
        """
        return protocol_id("probe", self.version, self.task_protocol(task))

    def protocol_ids(self) -> dict[str, str]:
        """Every task's protocol id, by task name (in the protocol's order)."""
        return {name: self.protocol_id(name) for name in self.tasks}

    def replace(self, **changes) -> ProbeProtocol:
        """A copy with ``changes`` applied.

        ``tasks`` maps a task name to a dict of its changes (merged into that task's settings) or to
        a settings object; values may be JSON-style (lists for tuples), so a parsed JSON file of
        overrides can be passed as is.

        Raises:
            UnknownNameError: an unknown protocol key, task or task settings key.
        """
        changes = _checked_keys(changes, type(self), "probe protocol key")
        if "tasks" in changes:
            if not isinstance(changes["tasks"], dict):
                raise ValueError(f"protocol.tasks: expected a dict by task name, got {changes['tasks']!r}")
            merged = dict(self.tasks)
            for name, value in changes["tasks"].items():
                if isinstance(value, dict) and name in merged:
                    value = {**dataclasses.asdict(merged[name]), **value}
                merged[name] = task_settings(name, value)
            changes["tasks"] = merged
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> ProbeProtocol:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`UnknownNameError` naming the known ones."""
        d = _checked_keys(d, cls, "probe protocol key")
        if "tasks" in d:
            d["tasks"] = {k: task_settings(k, v) for k, v in d["tasks"].items()}
        return cls(**d)


def default_protocol() -> ProbeProtocol:
    """The default protocol: the closed-form linear probe on every task (the headline read-out)."""
    return ProbeProtocol()


def body_protocol() -> ProbeProtocol:
    """The default protocol with the trained pixel-shuffle body on every task (v3's decoders).

    Not the headline: on the synthetic split the body learns the tasks from random features about
    as well as from pretrained ones (docs/probing.md, "Validity"). Its own protocol id.
    """
    return ProbeProtocol(tasks=default_task_settings("pixelshuffle"))


def quick_protocol() -> ProbeProtocol:
    """A much cheaper protocol for tests (different ``protocol_id``; never ranked with the default)."""
    return ProbeProtocol(
        input_size=(64, 48),
        tasks=default_task_settings("pixelshuffle"),
        bootstrap_resamples=200,
        iterations=30,
        batch_size=4,
        warmup_iters=3,
        decoder_channels=16,
        decoder_min_channels=16,
        max_train_samples=8,
        max_test_samples=4,
    )


# What each task's protocol id covers (every field of ProbeProtocol is in exactly one group; checked
# below). Shared: the input policy, the backbone's precision and taps, the interval and the splits.
# a masked task's read-out form ("": the task is not masked)
MASKED_READOUTS = ("", "mask-and-prior")

SHARED_FIELDS = (
    "version", "input_size", "padding", "num_tapped_layers", "cls_concat", "augmentation", "feature_dtype",
    "backbone_dtype", "interval_level", "bootstrap_resamples", "bootstrap_seed", "train_split", "test_split",
    "max_train_samples", "max_test_samples", "holdout_every",
)
# The closed-form shortcut's knobs (both read-outs fit it; the oracle's features are laid out at
# the stage stride) and those only a trained body reads (optimiser, schedule, widths, loss grid).
_SHORTCUT_FIELDS = (
    "shortcut", "ridge_alphas", "ridge_holdout_every", "ridge_product_dtype", "decoder_stage_stride",
)
_BODY_FIELDS = (
    "decoder_channels", "decoder_min_channels", "loss_stride", "optimizer", "lr", "weight_decay", "betas",
    "schedule", "warmup_iters", "min_lr_ratio", "iterations", "batch_size", "grad_clip",
)
# by ``TaskSettings.decoder``: the top-level fields that read-out reads
READOUT_FIELDS = {"linear": _SHORTCUT_FIELDS, "pixelshuffle": (*_SHORTCUT_FIELDS, *_BODY_FIELDS)}


def _check_field_groups() -> None:
    grouped = [*SHARED_FIELDS, *_SHORTCUT_FIELDS, *_BODY_FIELDS, "tasks"]
    fields = [f.name for f in dataclasses.fields(ProbeProtocol)]
    if sorted(grouped) != sorted(fields):
        raise RuntimeError(
            "benchmarks.probe.protocol: every ProbeProtocol field must be in exactly one of SHARED_FIELDS, "
            f"_SHORTCUT_FIELDS, _BODY_FIELDS (ungrouped: {sorted(set(fields) - set(grouped))}, "
            f"unknown or twice: {sorted(k for k in set(grouped) if grouped.count(k) != fields.count(k))})"
        )


_check_field_groups()
