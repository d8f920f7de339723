"""Frozen-backbone features, computed once per image and shared by every decoder.

The backbone runs under ``torch.inference_mode()``; each image's tapped layers are concatenated
(``L*C x h x w``, plus ``L*C`` CLS values) and kept in memory (unless ``keep_in_memory=False``), and
optionally on disk under ``cache_dir/<feature key>/<image hash>.safetensors``
(:mod:`benchmarks.probe.features.cache`: crash-safe, a truncated entry is named and rebuilt) so other
tasks, seeds and later (resumed) runs reuse them. The dense tasks of the synthetic benchmark share
their images, so their features are computed once. A NaN, Inf or a value the protocol's
``feature_dtype`` cannot hold is an error naming the backbone, the layer and the image, raised before
any fit. Under torch.distributed each rank computes a shard of :meth:`FeatureStore.compute` and the
shards are all-gathered; :meth:`FeatureStore.features` serves one batch on the calling rank alone
(for a streamed path: :mod:`benchmarks.probe.data.loader`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tqdm.auto import tqdm

from benchmarks.probe.features.cache import DiskCache, check_finite
from benchmarks.probe.records.runkey import weights_sha256
from sapiens2 import distributed as dist_utils
from sapiens2.distributed import all_gather_varlen

if TYPE_CHECKING:
    from benchmarks.probe.backbones.base import ProbeBackbone
    from benchmarks.probe.settings import ProtocolView


@dataclass
class FeatureSet:
    """Cached features of N images.

    Attributes:
        feats: N x (L*C) x h x w spatial features (``feature_dtype``).
        cls: N x (L*C) CLS tokens, or None.
        patch_size: stride of the feature grid.
        valid_frac: fraction (height, width) of the grid covering the image (padding excluded).
        image_size: (H, W) of the unpadded input images.
    """

    feats: torch.Tensor
    cls: torch.Tensor | None
    patch_size: int
    valid_frac: tuple[float, float]
    image_size: tuple[int, int]

    def batch(self, idx: torch.Tensor, cls_concat: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Assembled decoder input for rows ``idx``: (spatial B x C' x h x w, pooled B x P)."""
        x = self.feats[idx].float()
        pooled = [x.mean(dim=(2, 3))]
        if self.cls is not None:
            c = self.cls[idx].float()
            pooled.append(c)
            if cls_concat:
                x = torch.cat([x, c[:, :, None, None].expand(-1, -1, *x.shape[-2:])], dim=1)
        return x, torch.cat(pooled, dim=1)

    def channels(self, cls_concat: bool) -> tuple[int, int]:
        """(spatial channels, pooled channels) of :meth:`batch`."""
        c = self.feats.shape[1]
        k = 0 if self.cls is None else self.cls.shape[1]
        return c + (k if cls_concat else 0), c + k


def backbone_autocast(device_type: str, dtype: str) -> torch.autocast:
    """The autocast context of the protocol's ``backbone_dtype`` (disabled for ``"float32"``).

    Under autocast the matrix products run in the lower precision while norms and softmax stay
    float32; measured on sapiens2_0.1b (random init, 8 images at 256x192): features within 0.5%
    relative error of float32 (docs/probing.md).
    """
    low = dtype in ("bfloat16", "float16")
    return torch.autocast(device_type, dtype=getattr(torch, dtype) if low else torch.bfloat16, enabled=low)


def image_hash(image: torch.Tensor) -> str:
    """Content hash of one image tensor (shape, dtype and bytes)."""
    t = image.detach().contiguous().cpu()
    h = hashlib.sha256(f"{tuple(t.shape)}|{t.dtype}".encode())
    h.update(t.numpy().tobytes())
    return h.hexdigest()[:32]


def feature_key(backbone: ProbeBackbone, layers: list[int], protocol: ProtocolView,
                weights_hash: str | None = None) -> str:
    """Hash of what determines the features: backbone identity and weights, layers, input policy.

    Args:
        backbone: the probing backbone.
        layers: tapped block indices.
        protocol: the protocol (padding, feature dtype).
        weights_hash: :func:`~benchmarks.probe.records.runkey.weights_sha256` of the backbone when already
            computed (every byte of every tensor is hashed: a changed weight anywhere changes the key).
    """
    desc = backbone.describe()
    blob = json.dumps(
        {
            "backbone": desc,
            "state": weights_hash or weights_sha256(backbone),
            "layers": list(layers),
            "padding": protocol.padding,
            "dtype": protocol.feature_dtype,
            "backbone_dtype": protocol.backbone_dtype,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class FeatureStore:
    """Memory (and optional disk) cache of backbone features keyed by image content.

    Args:
        backbone: a :class:`~benchmarks.probe.backbones.ProbeBackbone`.
        layers: tapped block indices.
        protocol: the :class:`~benchmarks.probe.protocol.ProbeProtocol`.
        cache_dir: on-disk cache folder, or None for memory only.
        batch_size: images per backbone forward.
        weights_hash: the backbone's weights hash when already computed (see :func:`feature_key`).
        keep_in_memory: keep every image's features in RAM (False: only the disk cache, if any,
            remembers them; what the streamed probe uses, so memory does not grow with the images).
        name: the backbone's name in error messages (default: its class name).
    """

    def __init__(
        self,
        backbone: ProbeBackbone,
        layers: Sequence[int],
        protocol: ProtocolView,
        cache_dir: str | os.PathLike | None = None,
        batch_size: int = 8,
        weights_hash: str | None = None,
        keep_in_memory: bool = True,
        name: str | None = None,
    ):
        self.backbone, self.layers, self.protocol, self.batch_size = (
            backbone,
            list(layers),
            protocol,
            batch_size,
        )
        self.dtype = getattr(torch, protocol.feature_dtype)
        self.key = feature_key(backbone, self.layers, protocol, weights_hash)
        self.dir = Path(cache_dir) / self.key if cache_dir else None
        self.disk = DiskCache(self.dir, self.dtype) if self.dir is not None else None
        self.keep_in_memory = keep_in_memory
        self.name = name or type(backbone).__name__
        self.memory: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self.backbone_images = 0  # images actually run through the backbone by this process

    def _load(self, h: str) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        if h in self.memory:
            return self.memory[h]
        if self.disk is not None:
            got = self.disk.read(h)
            if got is not None and self.keep_in_memory:
                self.memory[h] = got
            return got
        return None

    def _store(self, h: str, feats: torch.Tensor, cls: torch.Tensor | None) -> None:
        if self.keep_in_memory:
            self.memory[h] = (feats, cls)
        if self.disk is not None:
            self.disk.write(h, feats, cls)

    def _run(self, images: torch.Tensor, names: list[str]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One backbone forward: (B x L*C x h x w, B x L*C or None) in ``feature_dtype`` on the CPU,
        checked finite (and within the dtype's range) per layer and image before anything is stored."""
        with backbone_autocast(images.device.type, self.protocol.backbone_dtype):
            feats, cls = self.backbone.extract(images, self.layers, self.protocol.padding)
        check_finite(feats, cls, self.dtype, self.name, self.layers, names)
        f = torch.cat([t.to(self.dtype) for t in feats], 1).cpu()
        c = torch.cat([t.to(self.dtype) for t in cls], 1).cpu() if cls is not None else None
        self.backbone_images += int(images.shape[0])
        return f, c

    def features(
        self, images: torch.Tensor, ids: list | None = None, hashes: list[str] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Features of one batch of B x 3 x H x W images in [0, 1], on this rank alone.

        Cached images (memory or disk) are not recomputed; the others run through the backbone in
        one forward. Nothing is kept in RAM when ``keep_in_memory`` is False.

        Args:
            images: the batch.
            ids: a name per image for error messages (default: its position and content hash).
            hashes: the images' :func:`image_hash` when already known.

        Returns:
            (B x L*C x h x w, B x L*C or None) in ``feature_dtype`` on the CPU.
        """
        hashes = hashes or [image_hash(im) for im in images]
        rows = [self._load(h) for h in hashes]
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            names = [_image_name(ids, i, hashes[i]) for i in todo]
            f, c = self._run(images[todo], names)
            for j, i in enumerate(todo):
                rows[i] = (f[j].clone(), None if c is None else c[j].clone())
                self._store(hashes[i], *rows[i])
        feats = torch.stack([r[0] for r in rows])
        return feats, (torch.stack([r[1] for r in rows]) if rows[0][1] is not None else None)

    def compute(self, images: torch.Tensor, desc: str = "features", ids: list | None = None) -> FeatureSet:
        """Features of N x 3 x H x W images in [0, 1] (cached ones are not recomputed).

        ``ids`` names the images in errors (default: ``desc``, their position and content hash).
        """
        if not self.keep_in_memory:
            raise ValueError("FeatureStore.compute needs keep_in_memory=True; stream with features()")
        hashes = [image_hash(im) for im in images]
        todo = [i for i, h in enumerate(hashes) if self._load(h) is None]
        rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
        mine = todo[rank::world]
        bar = tqdm(total=len(mine), desc=desc, unit="img", disable=rank != 0 or not mine, leave=False)
        for s in range(0, len(mine), self.batch_size):
            sel = mine[s : s + self.batch_size]
            f, c = self._run(images[sel], [_image_name(ids, i, hashes[i], desc) for i in sel])
            for j, i in enumerate(sel):
                self._store(hashes[i], f[j].clone(), None if c is None else c[j].clone())
            bar.update(len(sel))
        bar.close()
        if world > 1 and todo:
            self._share(todo, hashes)
        rows = [self._load(h) for h in hashes]
        feats = torch.stack([r[0] for r in rows])
        cls = torch.stack([r[1] for r in rows]) if rows[0][1] is not None else None
        dev = images.device
        return self.feature_set(feats.to(dev), None if cls is None else cls.to(dev), tuple(images.shape[-2:]))

    def feature_set(self, feats: torch.Tensor, cls: torch.Tensor | None,
                    image_size: Sequence[int]) -> FeatureSet:
        """A :class:`FeatureSet` of these features of images of ``image_size`` (H, W)."""
        h, w = image_size
        gh, gw = feats.shape[-2:]
        p = self.backbone.patch_size
        frac = (h / (gh * p), w / (gw * p)) if self.protocol.padding == "pad" else (1.0, 1.0)
        return FeatureSet(feats, cls, p, frac, (h, w))

    def _share(self, todo: list[int], hashes: list[str]) -> None:
        """All-gather the features each rank computed for its shard of ``todo``."""
        rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
        mine = todo[rank::world]
        ref = self._load(hashes[mine[0]]) if mine else None
        shape = self.backbone_feature_shape(ref)
        f = (
            torch.stack([self.memory[hashes[i]][0] for i in mine])
            if mine
            else torch.zeros((0, *shape[0]), dtype=self.dtype)
        )
        idx = torch.tensor(mine, dtype=torch.int64)
        gathered_idx = all_gather_varlen(idx)
        gathered_f = all_gather_varlen(f)
        if shape[1] is not None:
            c = (
                torch.stack([self.memory[hashes[i]][1] for i in mine])
                if mine
                else torch.zeros((0, shape[1]), dtype=self.dtype)
            )
            gathered_c = all_gather_varlen(c)
        else:
            gathered_c = [None] * len(gathered_idx)
        for gi, gf, gc in zip(gathered_idx, gathered_f, gathered_c):
            for j, i in enumerate(gi.tolist()):
                if hashes[i] not in self.memory:
                    self.memory[hashes[i]] = (gf[j].clone(), None if gc is None else gc[j].clone())

    def backbone_feature_shape(
        self, ref: tuple[torch.Tensor, torch.Tensor | None] | None
    ) -> tuple[tuple, int | None]:
        """((L*C, h, w), L*C or None) of this store's features, agreed across ranks."""
        shape = (
            None if ref is None else (tuple(ref[0].shape), None if ref[1] is None else int(ref[1].shape[0]))
        )
        shapes = dist_utils.all_gather_object(shape)
        return next(s for s in shapes if s is not None)


def _image_name(ids: Sequence[str | None] | None, i: int, h: str, desc: str = "") -> str:
    """How an error names image ``i``: its id, else its position (in ``desc``) and content hash."""
    if ids is not None and ids[i] is not None:
        return repr(str(ids[i]))
    return f"#{i}{f' of {desc}' if desc else ''} (content hash {h[:12]})"
