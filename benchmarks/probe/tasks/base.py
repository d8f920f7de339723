"""What a probing task defines: settings, targets, loss, oracle features and the evaluator adapter.

Each task is a small :class:`ProbeTask` subclass in its own module, registered with
:func:`register_probe_task` together with its settings class (a
:class:`~benchmarks.probe.protocol.TaskSettings` subclass whose field defaults are the task's
defaults). Losses are means over samples of
per-sample means, so that DDP's gradient averaging over equal per-rank batches equals the
single-process gradient of the global batch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from benchmarks.probe.readout.base import get_readout
from benchmarks.probe.registry import PROBE_TASKS
from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.train.losses import get_loss
from evaluators.base import Evaluator
from sapiens2 import vocab as vocabularies

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView

# a task's keypoint / label set, and what names one (a set, a built-in name, a JSON path or dict; None:
# the settings' or the default)
Vocabulary = vocabularies.KeypointSet | vocabularies.LabelSet
VocabularySpec = Vocabulary | str | dict | list | None


def per_sample_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` (B x ... x H x W, channels averaged) over each sample's mask pixels -> B."""
    if values.dim() == 4:
        values = values.mean(dim=1)
    m = mask.to(values.dtype)
    return (values * m).flatten(1).sum(1) / m.flatten(1).sum(1).clamp_min(1.0)


def image_gradients(x: torch.Tensor,
                    mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Finite differences along x and y, with masks where both neighbours are valid."""
    gx = x[..., :, 1:] - x[..., :, :-1]
    gy = x[..., 1:, :] - x[..., :-1, :]
    mx = mask[..., :, 1:] & mask[..., :, :-1]
    my = mask[..., 1:, :] & mask[..., :-1, :]
    return gx, gy, mx, my


def gradient_l1(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample L1 between the image gradients of ``pred`` and ``gt`` over the mask -> B."""
    px, py, mx, my = image_gradients(pred, mask)
    gx, gy, _, _ = image_gradients(gt, mask)
    return 0.5 * (per_sample_masked_mean((px - gx).abs(), mx) + per_sample_masked_mean((py - gy).abs(), my))


def resize_to(pred: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear resize of B x C x h x w maps to ``size`` (no-op when equal)."""
    if tuple(pred.shape[-2:]) == tuple(size):
        return pred
    return F.interpolate(pred, size=tuple(size), mode="bilinear", align_corners=False)


def loss_grid(
    pred: torch.Tensor, gt_size: tuple[int, int], stride: int, offset: tuple[int, int] | None = None
) -> torch.Tensor:
    """``pred`` bilinearly upsampled to ``gt_size`` and read at every ``stride``-th pixel from ``offset``.

    Equals ``resize_to(pred, gt_size)[..., oy::stride, ox::stride]`` but only computes the picked pixels
    (``offset`` defaults to ``(stride // 2, stride // 2)``).
    """
    if stride <= 1:
        return resize_to(pred, gt_size)
    h, w = gt_size
    oy, ox = offset if offset is not None else (stride // 2, stride // 2)
    if tuple(pred.shape[-2:]) == (h, w):
        return pred[..., oy::stride, ox::stride]
    ys = (2 * (torch.arange(oy, h, stride, dtype=pred.dtype, device=pred.device) + 0.5) / h) - 1
    xs = (2 * (torch.arange(ox, w, stride, dtype=pred.dtype, device=pred.device) + 0.5) / w) - 1
    grid = torch.stack(torch.meshgrid(ys, xs, indexing="ij")[::-1], dim=-1)
    grid = grid[None].expand(pred.shape[0], -1, -1, -1)
    return F.grid_sample(pred, grid, mode="bilinear", padding_mode="border", align_corners=False)


def subsample(t: torch.Tensor, stride: int, offset: tuple[int, int] | None = None) -> torch.Tensor:
    """Every ``stride``-th pixel of the last two dims from ``offset`` (default ``stride // 2``)."""
    if stride <= 1:
        return t
    oy, ox = offset if offset is not None else (stride // 2, stride // 2)
    return t[..., oy::stride, ox::stride]


def resize_masked(values: torch.Tensor, mask: torch.Tensor,
                  size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """C x H x W values known on the bool H x W ``mask``, resampled to ``size`` (H', W').

    Mask-aware: each output pixel is the bilinear average of the mask's pixels alone (the bilinear
    weights renormalised over the mask, so off-mask values, zero or NaN, never leak in); the mask is
    resized nearest and kept only where a mask pixel lies under the bilinear support.

    Returns:
        (C x H' x W' float32 values, 0 off the new mask; bool H' x W' mask).
    """
    m = mask[None, None].float()
    v = torch.where(mask[None], values.float(), torch.zeros((), dtype=torch.float32))[None]
    num = F.interpolate(v, size=tuple(size), mode="bilinear", align_corners=False)
    den = F.interpolate(m, size=tuple(size), mode="bilinear", align_corners=False)
    keep = (F.interpolate(m, size=tuple(size), mode="nearest") > 0.5) & (den > 0)
    out = torch.where(keep, num / den.clamp_min(1e-12), torch.zeros((), dtype=torch.float32))
    return out[0], keep[0, 0]


def dense_targets(task: str, samples: list[dict], fields: dict[str, list[torch.Tensor]],
                  masks: list[torch.Tensor], input_size: tuple[int, int],
                  unit: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """The GT of a masked dense task: ``{key: B x C x H x W, "mask": B x H x W}`` (+ the native layout).

    Every map at the protocol's ``input_size``: the native maps, stacked as they are. Otherwise ``key``
    and ``mask`` hold the *train layout*, each map resized to ``input_size`` (the size the read-out
    sees every image at; :func:`resize_masked`, and the ``unit`` keys renormalised to unit length; a
    map already at that size is kept), for the fit and training only; scoring uses ``native_<key>`` /
    ``native_mask`` (each native map, padded with 0 / False to the largest size: the padding is never
    scored) and ``native_size`` (B x 2: each map's own H, W), see :func:`native_views`. A sample's
    values depend on that sample alone, never on the batch it is read in (the streamed probe reads
    a split in batches of any composition).

    Raises:
        ValueError: a sample's map and mask differ in size (naming the sample).
    """
    for key, maps in fields.items():
        for s, v, m in zip(samples, maps, masks):
            if v.shape[-2:] != m.shape[-2:]:
                raise ValueError(f"{task} probe: sample {s.get('id', s.get('index'))}: {key} is "
                                 f"{tuple(v.shape[-2:])} but its mask is {tuple(m.shape[-2:])}")
    sizes = torch.tensor([tuple(m.shape[-2:]) for m in masks], dtype=torch.int64)
    if all(tuple(m.shape[-2:]) == tuple(input_size) for m in masks):
        return {**{k: torch.stack(v) for k, v in fields.items()}, "mask": torch.stack(masks)}
    hmax, wmax = (int(v) for v in sizes.amax(0))
    out: dict[str, torch.Tensor] = {"native_size": sizes}
    native_mask = torch.zeros(len(masks), hmax, wmax, dtype=torch.bool)
    for i, m in enumerate(masks):
        native_mask[i, : m.shape[-2], : m.shape[-1]] = m
    for key, maps in fields.items():
        native = torch.zeros(len(maps), maps[0].shape[0], hmax, wmax, dtype=maps[0].dtype)
        train, train_mask = [], []
        for i, (v, m) in enumerate(zip(maps, masks)):
            native[i, :, : v.shape[-2], : v.shape[-1]] = v
            if tuple(v.shape[-2:]) == tuple(input_size):  # as in a batch of that size alone
                r, rm = v, m
            else:
                r, rm = resize_masked(v, m, input_size)
                r = F.normalize(r, dim=0) * rm if key in unit else r
            train.append(r)
            train_mask.append(rm)
        out[key], out[f"native_{key}"] = torch.stack(train), native
        out["mask"] = torch.stack(train_mask)
    out["native_mask"] = native_mask
    return out


def native_views(tgt: dict, keys: tuple[str, ...],
                 index: torch.Tensor) -> Iterator[tuple[slice, dict[str, torch.Tensor], torch.Tensor]]:
    """Per sample of a several-size batch (:func:`dense_targets`): (one-row slice of the batch,
    ``{key: its unpadded native map}`` for ``keys`` and ``mask``, its dataset index)."""
    index = torch.as_tensor(index)
    for i, (h, w) in enumerate(tgt["native_size"].tolist()):
        one = slice(i, i + 1)
        yield one, {k: tgt[f"native_{k}"][one, ..., :h, :w] for k in (*keys, "mask")}, index[one]


def _vocabulary_content(v: Vocabulary) -> str:
    if isinstance(v, vocabularies.KeypointSet):
        body = {"names": list(v.names), "sigmas": [float(x) for x in v.sigmas],
                "parts": {k: list(map(int, i)) for k, i in v.parts.items()},
                "flip_pairs": [list(map(int, p)) for p in v.flip_pairs]}
    else:
        body = {"names": list(v.names), "ignore_index": int(v.ignore_index)}
    return json.dumps(body, sort_keys=True)


def vocabulary_id(v: Vocabulary) -> str:
    """The name a protocol and a record give a keypoint / label set: a built-in set's name when ``v``
    is that set; otherwise its name + the first 12 hex digits of the SHA-256 of its content (names,
    sigmas, parts, flip pairs / names, ignore index), so two user sets of one name never share an id."""
    keypoints = isinstance(v, vocabularies.KeypointSet)
    builtin = vocabularies.keypoint_sets() if keypoints else vocabularies.label_sets()
    content = _vocabulary_content(v)
    if v.name in builtin:
        ref = vocabularies.keypoint_set(v.name) if keypoints else vocabularies.label_set(v.name)
        if _vocabulary_content(ref) == content:
            return v.name
    return f"{v.name}-{hashlib.sha256(content.encode()).hexdigest()[:12]}"


class ProbeTask:
    """Base class of the probing tasks.

    Attributes:
        name: task name (a task of the task table, ``sapiens2.tasks``).
        settings_class: the task's :class:`~benchmarks.probe.protocol.TaskSettings` subclass; its
            field defaults are the task's default settings (decoder, output stride, loss and weights,
            the task's own knobs).
        crops: True when the samples are fixed-size crops at the protocol's ``input_size`` (pose's
            top-down crops); False: whole images, resized to it.
        out_channels: maps the decoder predicts.
        global_channels: scalars the decoder predicts from pooled features (0: none).
        required_keys: sample keys the task needs (checked before any training).
    """

    name = ""
    settings_class: type[TaskSettings] = TaskSettings
    crops = False
    out_channels = 0
    # masked: linear_targets is [mask * t, mask]; the read-out predicts mask * t + prior * (1 - mask)
    masked = False
    global_channels = 0
    required_keys: tuple = ()
    oracle_patch = 1  # stride of the oracle features (the targets' own resolution)
    # the reader attribute naming the GT's vocabulary ("keypoint_set" / "label_set"; "": the task has none)
    vocabulary_kind = ""
    default_vocabulary = ""  # the set of data that names none (the synthetic split's)

    def __init__(self, protocol: ProtocolView):
        self.protocol = protocol
        self.settings = protocol.task(self.name)
        self.loss_offset: tuple[int, int] | None = None
        # the protocol's loss, looked up by name (unknown loss or term names fail here, before training);
        # a probe-only task names none: the closed-form linear read-out trains nothing
        self.loss_spec = get_loss(self.name, self.settings.loss) if self.settings.loss else None
        self.loss_weights = self.loss_spec.weights(self.settings.loss_weights) if self.loss_spec else {}
        if self.loss_spec is None and get_readout(self.settings.decoder).trains:
            raise ValueError(f"probe task {self.name!r} names no loss, so only a read-out that trains "
                             f"nothing (the closed-form 'linear') can run it, but the protocol's "
                             f"tasks.{self.name}.decoder is {self.settings.decoder!r}, which trains: set "
                             "it to 'linear' or give the task a loss")

    def use_vocabulary(self, vocab: VocabularySpec = None) -> None:
        """Size the read-out and the evaluator from the split's vocabulary (a task with one overrides this).

        Args:
            vocab: the split's keypoint / label set (None: the one the settings name, else the default).
        """

    def vocabulary(self) -> dict[str, str]:
        """``{vocabulary_kind: id}`` of the set the task is sized from (:func:`vocabulary_id`; {}: none)."""
        v = getattr(self, self.vocabulary_kind, None) if self.vocabulary_kind else None
        return {self.vocabulary_kind: vocabulary_id(v)} if v is not None else {}

    def _resolve_vocabulary(self, vocab: VocabularySpec,
                            lookup: Callable[[VocabularySpec], Vocabulary]) -> Vocabulary:
        """The set to size from: ``vocab`` (checked against the settings' field), else the settings', else
        :attr:`default_vocabulary`.

        Raises:
            ValueError: the protocol names another set than the data's.
        """
        field_name = self.settings.VOCABULARY_FIELD
        named = getattr(self.settings, field_name) if field_name else ""
        if vocab is None:
            return lookup(named or self.default_vocabulary)
        v = lookup(vocab)
        if named and named != vocabulary_id(v):
            raise ValueError(
                f"{self.name}: the protocol's tasks.{self.name}.{field_name} is {named!r} but the data's "
                f"{self.vocabulary_kind} is {vocabulary_id(v)!r}"
            )
        return v

    def set_step(self, it: int) -> None:
        """Pick the loss grid's offset for iteration ``it``.

        With ``loss_stride`` s > 1 the offset cycles through all s*s phases, so every output pixel
        (e.g. every PixelShuffle sub-position) is trained, at 1/s^2 of the full-resolution loss cost.
        """
        s = self.protocol.loss_stride
        self.loss_offset = ((it // s) % s, it % s) if s > 1 else None

    # ---------------------------------------------------------------- data
    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        """Stack the GT of ``samples`` into tensors (first dim = sample)."""
        raise NotImplementedError

    def check_samples(self, samples: list[dict], where: str) -> None:
        """Raise a ValueError naming ``where`` when a sample lacks this task's GT."""
        for s in samples[:1]:
            missing = [k for k in self.required_keys if k not in s or s[k] is None]
            if missing:
                raise ValueError(
                    f"{where}: samples lack the {self.name} ground truth {missing} (sample keys: {sorted(s)})"
                )

    def output_size(self, image_size: tuple[int, int], stride: int) -> tuple[int, int]:
        """Decoder output size for an unpadded image of ``image_size`` at ``stride``."""
        return (-(-image_size[0] // stride), -(-image_size[1] // stride))

    # ---------------------------------------------------------------- training
    def loss(self, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict) -> tuple[torch.Tensor, dict]:
        """(scalar loss, {term: float}) for a batch: the protocol's loss (``settings.loss``) with its
        ``loss_weights``; terms are per-sample means averaged over the batch."""
        if self.loss_spec is None:
            raise ValueError(f"probe task {self.name!r} names no loss: nothing can train its decoder")
        return self.loss_spec(self, maps, glob, tgt, self.loss_weights)

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        """B x out x H x W targets of the read-out, in the decoder's pre-activation space.

        A ``masked`` task (the evaluator scores only GT-mask pixels) returns ``[mask * t, mask]``
        (out + 1 maps): its read-out regresses both and predicts ``mask * t + mu * (1 - mask)``, with
        ``mu`` the per-pixel train mean of ``t`` over the masks (:mod:`benchmarks.probe.readout.shortcut`).
        """
        raise NotImplementedError

    def global_targets(self, tgt: dict) -> torch.Tensor | None:
        """B x ``global_channels`` targets of the global branch (pre-activation), or None."""
        return None

    def global_prior(self, targets: dict) -> torch.Tensor | None:
        """Train-set prior the global branch's bias starts from (``global_channels`` values), or None."""
        return None

    # ---------------------------------------------------------------- evaluation
    def make_evaluator(self) -> Evaluator:
        """The ``evaluators`` object scoring this task."""
        raise NotImplementedError

    def update_evaluator(self, evaluator: Evaluator, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict,
                         index: torch.Tensor) -> None:
        """Feed one batch of predictions (decoder outputs) and GT to ``evaluator``."""
        raise NotImplementedError

    # ---------------------------------------------------------------- sanity check
    def oracle_features(self, tgt: dict) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """Features computed from the GT itself: (B x C x h x w, CLS B x C or None, patch size).

        They are the :meth:`linear_targets` (and :meth:`global_targets` as the CLS token), so the
        closed-form read-out maps them to its targets exactly and a probe on them shows the ceiling
        that decoding and evaluation allow.
        """
        glob = self.global_targets(tgt)
        feats = self.linear_targets(tgt).float()
        return feats, None if glob is None else glob.float(), self.oracle_patch


def register_probe_task(cls: type[ProbeTask]) -> type[ProbeTask]:
    """Class decorator: register a :class:`ProbeTask` subclass under its ``name`` in ``PROBE_TASKS``.

    Raises:
        ValueError: no name, or a settings class that is not a ``TaskSettings`` subclass.
        KeyError: a probe task of that name is registered already (mmengine's message).
    """
    if not cls.name:
        raise ValueError(f"probe task class {cls.__name__}: empty name")
    if not (isinstance(cls.settings_class, type) and issubclass(cls.settings_class, TaskSettings)):
        raise ValueError(f"probe task {cls.name!r}: settings_class must be a TaskSettings subclass, "
                         f"got {cls.settings_class!r}")
    PROBE_TASKS.register_module(name=cls.name, module=cls)
    return cls


def unregister_probe_task(name: str) -> None:
    """Remove a probe task from the registry (tests that register a toy task clean up with this)."""
    PROBE_TASKS.module_dict.pop(name, None)
