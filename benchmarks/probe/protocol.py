"""The dense-probing protocol as one typed, hashable config.

Every knob that changes a probe's numbers lives in :class:`ProbeProtocol`; ``protocol_id`` hashes
all of them (canonical JSON, SHA-256), and every result record carries that id, so results made
under different protocols are never ranked together.

Example:
    >>> from benchmarks.probe.protocol import ProbeProtocol
    >>> p = ProbeProtocol()
    >>> p.protocol_id().startswith("probe-")
    True
    >>> p.tapped_layers(12)
    [2, 5, 8, 11]
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from sapiens2.tasks import task_names

TASKS = task_names()
PROTOCOL_VERSION = 3


@dataclass(frozen=True)
class TaskSettings:
    """Per-task decoder, output resolution and loss.

    Args:
        decoder: ``"linear"`` (the closed-form ridge shortcut alone: a 1x1 map from the tapped
            features to ``out * R^2`` channels + PixelShuffle(R), nothing trained) or
            ``"pixelshuffle"`` (that shortcut plus a trained body on its residual: 1x1 reduction,
            conv3x3 + PixelShuffle(2) stages to the stage stride, a zero-initialised prediction conv).
        output_stride: stride of the decoder output w.r.t. the input (pose heatmaps are at this stride;
            dense predictions are bilinearly resized from it to the full target size).
        loss: loss name (see ``benchmarks.probe.tasks``).
        loss_weights: weights of the loss terms, by term name.
    """

    decoder: str = "pixelshuffle"
    output_stride: int = 4
    loss: str = ""
    loss_weights: dict = field(default_factory=dict)


def _default_tasks() -> dict[str, TaskSettings]:
    return {
        "pose": TaskSettings(loss="heatmap_mse", loss_weights={"mse": 1000.0}),
        # dense tasks: conv stages to stride 4, then a PixelShuffle(4) head to full resolution
        "seg": TaskSettings(
            output_stride=1, loss="cross_entropy_dice", loss_weights={"ce": 1.0, "dice": 0.5}
        ),
        "normal": TaskSettings(output_stride=1, loss="cosine_l1", loss_weights={"cos": 1.0, "l1": 1.0}),
        "pointmap": TaskSettings(
            output_stride=1,
            loss="pointmap_l1_grad_scale",
            loss_weights={"l1": 1.0, "grad": 1.0, "scale": 1.0},
        ),
        "albedo": TaskSettings(output_stride=1, loss="l1_grad", loss_weights={"l1": 1.0, "grad": 1.0}),
    }


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
        tasks: per-task decoder/loss settings.
        shortcut: ``"ridge"``: every decoder starts from a linear shortcut fitted in closed form on
            the train split (:mod:`benchmarks.probe.shortcut`) and the body learns the residual;
            ``"none"``: the body alone (protocol v2's decoders).
        ridge_alphas: penalty grid of the shortcut (per row, on standardised features); the train
            mean alone (an infinite penalty) is always a candidate too.
        ridge_holdout_every: train image ``i`` is held out to pick the penalty when
            ``i % ridge_holdout_every == ridge_holdout_every - 1`` (the final fit uses every image).
        seg_logit_margin: the seg shortcut regresses the one-hot labels times this margin.
        pose_sigma: UDP Gaussian sigma in heatmap pixels.
        pose_blur_kernel: UDP decoding blur kernel.
        canonical_focal_length: pointmaps are compared in camera coordinates scaled by ``f_c / fx``.
        optimizer, lr, weight_decay, betas: AdamW settings of the decoder.
        warmup_iters, iterations, schedule: linear warm-up then cosine decay to ``min_lr_ratio * lr``.
        batch_size: global batch size (split over distributed ranks).
        grad_clip: max gradient norm.
        augmentation: ``"none"``; features are cached once per image, so no train-time augmentation.
        feature_dtype: dtype features are cached in.
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
    tasks: dict = field(default_factory=_default_tasks)
    shortcut: str = "ridge"
    ridge_alphas: tuple = tuple(10.0**k for k in range(-9, 4))
    ridge_holdout_every: int = 4
    seg_logit_margin: float = 10.0
    pose_sigma: float = 2.0
    pose_blur_kernel: int = 11
    canonical_focal_length: float = 768.0
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
    feature_dtype: str = "float16"
    train_split: str = "train"
    test_split: str = "test"
    max_train_samples: int = 0
    max_test_samples: int = 0
    holdout_every: int = 4

    def __post_init__(self):
        if self.padding not in ("pad", "resize"):
            raise ValueError(f"protocol.padding: expected 'pad' or 'resize', got {self.padding!r}")
        if self.augmentation != "none":
            raise ValueError(
                "protocol.augmentation: only 'none' is supported (features are cached per image)"
            )
        if len(self.input_size) != 2 or min(self.input_size) < 8:
            raise ValueError(f"protocol.input_size: expected (H, W) >= 8, got {self.input_size!r}")
        for name, ts in self.tasks.items():
            if name not in TASKS:
                raise ValueError(f"protocol.tasks: unknown task {name!r}; expected one of {TASKS}")
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
        if self.batch_size < 1 or self.iterations < 1:
            raise ValueError("protocol: batch_size and iterations must be >= 1")

    def task(self, name: str) -> TaskSettings:
        """Settings of task ``name`` (KeyError naming the known tasks otherwise)."""
        if name not in self.tasks:
            raise KeyError(f"task {name!r} not in the protocol; known: {sorted(self.tasks)}")
        return self.tasks[name]

    def tapped_layers(self, num_layers: int) -> list[int]:
        """0-based block indices to tap: ``num_tapped_layers`` evenly spaced, the last one included."""
        n = max(1, min(self.num_tapped_layers, num_layers))
        return sorted({(i + 1) * num_layers // n - 1 for i in range(n)})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (tuples as lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def protocol_id(self) -> str:
        """``probe-v<version>-<12 hex>``: SHA-256 of the canonical JSON of every field.

        The formula lives in :func:`leaderboard.integrity.protocol_id`, which record validation uses
        to check the id a record stores against the protocol dict in its config.
        """
        from leaderboard.integrity import protocol_id

        return protocol_id("probe", self.version, self.to_dict())

    def replace(self, **changes) -> ProbeProtocol:
        """A copy with ``changes`` applied; ``tasks`` may map a task name to a dict of its changes."""
        if "tasks" in changes and isinstance(changes["tasks"], dict):
            merged = dict(self.tasks)
            for k, v in changes["tasks"].items():
                base = merged.get(k, TaskSettings())
                merged[k] = dataclasses.replace(base, **v) if isinstance(v, dict) else v
            changes["tasks"] = merged
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> ProbeProtocol:
        """Inverse of :meth:`to_dict`; unknown keys raise a ValueError naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"probe protocol: unknown keys {unknown}; known: {sorted(known)}")
        d = dict(d)
        if "tasks" in d:
            d["tasks"] = {
                k: v if isinstance(v, TaskSettings) else TaskSettings(**v) for k, v in d["tasks"].items()
            }
        for k in ("input_size", "betas", "ridge_alphas"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)


def default_protocol() -> ProbeProtocol:
    """The default protocol (main job budget: several backbones x 5 tasks in ~10 min on 2 CPU cores)."""
    return ProbeProtocol()


def quick_protocol() -> ProbeProtocol:
    """A much cheaper protocol for tests (different ``protocol_id``; never ranked with the default)."""
    return ProbeProtocol(
        input_size=(64, 48),
        iterations=30,
        batch_size=4,
        warmup_iters=3,
        decoder_channels=16,
        decoder_min_channels=16,
        max_train_samples=8,
        max_test_samples=4,
    )
