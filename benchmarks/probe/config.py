"""The groups of the probing protocol, one typed dataclass each.

:class:`~benchmarks.probe.protocol.ProbeProtocol` holds one of each, and per-task settings.

The groups are what a task's protocol id covers: every task's id covers the shared groups
(:data:`SHARED_GROUPS`: the input, the bootstrap and the data), and the groups its read-out declares
(:attr:`~benchmarks.probe.readout.base.ProbeReadout.protocol_groups`: the closed-form ``readout``,
and a trained ``body``). A record stores these fields flat (one level, as ``ProbeProtocol.to_dict``
writes them), so ids and records read the same whatever the grouping in memory.

Example:
    >>> BodyConfig().lr, ReadoutConfig().shortcut, group_of("holdout_every")
    (0.001, 'ridge', 'data')
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from sapiens2.errors import UnknownNameError

_DTYPE_CHOICES = {
    "feature_dtype": ("float16", "bfloat16", "float32"),
    "backbone_dtype": ("float32", "bfloat16", "float16"),
    "ridge_product_dtype": ("float32", "float64"),
}
_SCALAR_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
_SCALAR_WANTED = {"int": "an integer", "float": "a finite number", "str": "a string", "bool": "true or false"}


def check_field_types(obj: object, where: str) -> None:
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


def checked_keys(d: dict, cls: type, kind: str) -> dict:
    """``d`` with JSON lists turned back into tuples; unknown keys raise :class:`UnknownNameError`."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in d:
        if k not in fields:
            raise UnknownNameError(kind, k, sorted(fields))
    return {k: tuple(v) if isinstance(v, list) and fields[k].type == "tuple" else v for k, v in d.items()}


def _check_dtypes(group: object) -> None:
    for f in dataclasses.fields(group):
        allowed = _DTYPE_CHOICES.get(f.name)
        if allowed is not None and getattr(group, f.name) not in allowed:
            raise ValueError(f"protocol.{f.name}: expected one of {allowed}, got {getattr(group, f.name)!r}")


@dataclass(frozen=True)
class InputConfig:
    """What the backbone sees and how its features are kept (shared by every task's id).

    Args:
        input_size: (H, W) the image (pose: the top-down crop) is resized to.
        padding: ``"pad"``: zero-pad bottom/right (after normalisation) to a multiple of the patch size;
            ``"resize"``: resize to the nearest multiple instead.
        num_tapped_layers: how many blocks to tap, evenly spaced with the last one included.
        cls_concat: broadcast each tapped layer's CLS token over the grid and concatenate it (ignored
            for backbones without a CLS token; the record says so).
        augmentation: ``"none"``; features are cached once per image, so no train-time augmentation.
        feature_dtype: dtype the tapped features are kept in (per batch, and in the on-disk cache):
            ``"float32"`` (the default: it holds any finite activation), or ``"bfloat16"`` /
            ``"float16"`` (half the cache; float16 overflows above 65504, an error naming the image).
        backbone_dtype: dtype the frozen backbone computes in: ``"float32"``, or ``"bfloat16"``
            (autocast: matrix products in bfloat16, norms and softmax in float32).
    """

    input_size: tuple = (256, 192)
    padding: str = "pad"
    num_tapped_layers: int = 4
    cls_concat: bool = True
    augmentation: str = "none"
    feature_dtype: str = "float32"
    backbone_dtype: str = "bfloat16"

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")
        if self.padding not in ("pad", "resize"):
            raise ValueError(f"protocol.padding: expected 'pad' or 'resize', got {self.padding!r}")
        if self.augmentation != "none":
            raise ValueError(
                "protocol.augmentation: only 'none' is supported (features are cached per image)"
            )
        if len(self.input_size) != 2 or min(self.input_size) < 8:
            raise ValueError(f"protocol.input_size: expected (H, W) >= 8, got {self.input_size!r}")
        _check_dtypes(self)


@dataclass(frozen=True)
class ReadoutConfig:
    """The closed-form fit every read-out starts from (:mod:`benchmarks.probe.readout.shortcut`).

    Args:
        shortcut: ``"ridge"``: every decoder starts from a linear shortcut fitted in closed form on
            the train split and a trained body learns the residual; ``"none"``: a trained body alone.
        ridge_alphas: penalty grid of the shortcut (per row, on standardised features); the train
            mean alone (an infinite penalty) is always a candidate too.
        ridge_holdout_every: train image ``i`` is held out to pick the penalty when
            ``i % ridge_holdout_every == ridge_holdout_every - 1`` (the final fit uses every image).
        ridge_product_dtype: dtype of the per-batch products of the shortcut's statistics
            (``"float64"``, or ``"float32"``: 1.8x less CPU, but it breaks the oracle's exact fit
            at the grid's smallest penalties; docs/probing.md, "Speed"), accumulated in float64.
        decoder_stage_stride: the stride the read-out's outputs are laid out at before the last
            PixelShuffle (the oracle's features sit there too); a trained body's conv stages stop there.
    """

    shortcut: str = "ridge"
    ridge_alphas: tuple = tuple(10.0**k for k in range(-9, 4))
    ridge_holdout_every: int = 4
    ridge_product_dtype: str = "float64"
    decoder_stage_stride: int = 4

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")
        if self.shortcut not in ("ridge", "none"):
            raise ValueError(f"protocol.shortcut: expected 'ridge' or 'none', got {self.shortcut!r}")
        if not self.ridge_alphas or not all(0 < a < float("inf") for a in self.ridge_alphas):
            raise ValueError(
                f"protocol.ridge_alphas: expected positive finite values, got {self.ridge_alphas!r}"
            )
        _check_dtypes(self)


@dataclass(frozen=True)
class BodyConfig:
    """A trained body's widths, optimiser and schedule (read only by a read-out that trains).

    Args:
        decoder_channels: hidden width of the pixel-shuffle decoder.
        decoder_min_channels: narrowest upsampling stage of the pixel-shuffle decoder.
        loss_stride: dense training losses use every ``loss_stride``-th GT pixel (predictions are
            bilinearly upsampled to the GT size and read at those pixels); evaluation uses all pixels.
        optimizer: the decoder's optimiser (:data:`benchmarks.probe.train.optim.OPTIMIZERS`: ``"adamw"``,
            ``"adam"``) with ``lr``, ``betas`` and ``weight_decay``.
        schedule: the learning-rate schedule (:data:`benchmarks.probe.train.optim.SCHEDULES`):
            ``"warmup_cosine"`` (linear warm-up over ``warmup_iters``, then cosine decay to
            ``min_lr_ratio * lr`` at ``iterations``) or ``"warmup_constant"``.
        iterations: decoder training iterations.
        batch_size: global batch size (split over distributed ranks).
        grad_clip: max gradient norm.
    """

    decoder_channels: int = 64
    decoder_min_channels: int = 32
    loss_stride: int = 2
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

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")
        if self.batch_size < 1 or self.iterations < 1:
            raise ValueError("protocol: batch_size and iterations must be >= 1")


@dataclass(frozen=True)
class BootstrapConfig:
    """The fixed-seed bootstrap over test images that gives every record's intervals.

    Args:
        interval_level: confidence level of the intervals.
        bootstrap_resamples: resamples drawn.
        bootstrap_seed: the resampling seed.
    """

    interval_level: float = 0.95
    bootstrap_resamples: int = 1000
    bootstrap_seed: int = 0

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")
        if not 0 < self.interval_level < 1 or self.bootstrap_resamples < 1:
            raise ValueError(
                f"protocol: interval_level must be in (0, 1) and bootstrap_resamples >= 1, got "
                f"{self.interval_level!r}, {self.bootstrap_resamples!r}"
            )


@dataclass(frozen=True)
class DataConfig:
    """Which samples are probed.

    Args:
        train_split, test_split: dataset splits used.
        max_train_samples, max_test_samples: caps on split sizes (0: all).
        holdout_every: for a single split folder, sample ``i`` is a test sample when
            ``i % holdout_every == holdout_every - 1``.
    """

    train_split: str = "train"
    test_split: str = "test"
    max_train_samples: int = 0
    max_test_samples: int = 0
    holdout_every: int = 4

    def __post_init__(self) -> None:
        check_field_types(self, "protocol")


# The protocol's groups by attribute name, in the order a record lists their fields.
GROUPS: dict[str, type] = {
    "input": InputConfig, "readout": ReadoutConfig, "body": BodyConfig, "bootstrap": BootstrapConfig,
    "data": DataConfig,
}
# covered by every task's id; the others are covered when the task's read-out declares them
SHARED_GROUPS = ("input", "bootstrap", "data")
READOUT_GROUPS = tuple(g for g in GROUPS if g not in SHARED_GROUPS)
_FIELD_GROUP = {f.name: g for g, cls in GROUPS.items() for f in dataclasses.fields(cls)}


def group_of(field_name: str) -> str | None:
    """The group a flat protocol field belongs to (None: not a grouped field)."""
    return _FIELD_GROUP.get(field_name)


def group_fields(group: str) -> tuple[str, ...]:
    """The flat field names of ``group``, in their declared order."""
    return tuple(f.name for f in dataclasses.fields(GROUPS[group]))
