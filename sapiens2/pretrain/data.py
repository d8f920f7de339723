"""Unlabelled image folders and the deterministic per-step batches of pretraining.

A split folder made by ``sapiens2-bench data synth`` keeps its images in ``DIR/images``; any other
folder is read directly (image files at its top level). The batch of step ``s`` on rank ``r`` is a
function of ``(seed, s, r)`` alone: the sample order is a seeded permutation per epoch, and each
sample's crops and masks come from a generator seeded by its position in the sample stream, so a
resumed run sees exactly the batches an uninterrupted one sees.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from sapiens2.datasets.io import DatasetError, read_rgb
from sapiens2.errors import BenchError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")


def list_images(root: str | Path) -> list[Path]:
    """Sorted image files of an unlabelled folder (``root/images`` when it exists, else ``root``).

    Raises:
        BenchError: the folder does not exist or holds no image files.
    """
    root = Path(root)
    if not root.is_dir():
        raise BenchError(f"pretraining data folder {root} does not exist or is not a folder")
    folder = root / "images" if (root / "images").is_dir() else root
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise BenchError(f"pretraining data folder {folder} holds no image files "
                         f"(looked for {', '.join(IMAGE_SUFFIXES)} at its top level)")
    return files


def images_sha256(files: list[Path]) -> str:
    """SHA-256 over the names and bytes of the image files (in order): the data identity of a run.

    Example:
        >>> len(images_sha256([]))
        64
    """
    import hashlib

    digest = hashlib.sha256()
    for f in files:
        digest.update(Path(f).name.encode("utf-8") + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def read_image(path: Path) -> torch.Tensor:
    """An image file as a 3 x H x W float tensor in [0, 1].

    Raises:
        BenchError: unreadable file (names it).
    """
    try:
        arr = read_rgb(path)
    except DatasetError as e:
        raise BenchError(f"pretraining image unreadable: {e}") from e
    return torch.from_numpy(np.array(arr, copy=True)).permute(2, 0, 1).float().div_(255.0)


def _mix(*values: int) -> int:
    """A 63-bit seed from integers (splitmix64 steps), stable across processes and platforms."""
    x = 0x9E3779B97F4A7C15
    for v in values:
        x = (x ^ (int(v) & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 31)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
    return x >> 1


class StepBatches(Dataset):
    """``dataset[step]`` is this rank's batch of that step (use with ``batch_size=None``).

    Args:
        files: image files.
        crops: a :class:`~sapiens2.pretrain.crops.MultiCrop`.
        batch_size: images per rank and step.
        seed: run seed.
        rank: this process's rank.
        world_size: number of processes.
        masking: optional mask generator (``MixedBlockMasking``) for the global views.
        mask_grid: the global views' token grid (needed with ``masking``).

    Each item is a dict: ``globals`` (G*B x 3 x H x W, view-major), ``locals`` (L*B x 3 x h x w or
    ``None``), ``mask`` and ``ids_keep`` (G*B x N and G*B x K, or ``None``), ``indices`` (B file
    indices).
    """

    def __init__(self, files, crops, batch_size: int, seed: int, rank: int = 0, world_size: int = 1,
                 masking=None, mask_grid: tuple[int, int] | None = None):
        self.files = list(files)
        self.crops, self.batch_size, self.seed = crops, int(batch_size), int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.masking, self.mask_grid = masking, mask_grid
        self._perm: tuple[int, torch.Tensor] | None = None

    def __len__(self) -> int:
        return 2**62

    def sample_index(self, position: int) -> int:
        """File index at a position of the global sample stream (a new permutation each epoch)."""
        n = len(self.files)
        epoch, offset = divmod(position, n)
        if self._perm is None or self._perm[0] != epoch:
            gen = torch.Generator().manual_seed(_mix(self.seed, 1, epoch))
            self._perm = (epoch, torch.randperm(n, generator=gen))
        return int(self._perm[1][offset])

    def __getitem__(self, step: int) -> dict:
        start = (int(step) * self.world_size + self.rank) * self.batch_size
        views_g: list[list[torch.Tensor]] = [[] for _ in range(self.crops.n_global)]
        views_l: list[list[torch.Tensor]] = [[] for _ in range(self.crops.n_local)]
        indices = []
        for j in range(self.batch_size):
            idx = self.sample_index(start + j)
            indices.append(idx)
            gen = torch.Generator().manual_seed(_mix(self.seed, 2, start + j))
            g, loc = self.crops(read_image(self.files[idx]), gen)
            for v, t in zip(views_g, g):
                v.append(t)
            for v, t in zip(views_l, loc):
                v.append(t)
        batch = {
            "globals": torch.cat([torch.stack(v) for v in views_g]),
            "locals": torch.cat([torch.stack(v) for v in views_l]) if views_l else None,
            "mask": None,
            "ids_keep": None,
            "indices": torch.tensor(indices),
        }
        if self.masking is not None:
            gen = torch.Generator().manual_seed(_mix(self.seed, 3, step, self.rank))
            draw = self.masking(batch["globals"].shape[0], self.mask_grid, gen)
            batch["mask"], batch["ids_keep"] = draw.mask, draw.ids_keep
        return batch
