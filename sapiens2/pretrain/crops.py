"""Multi-crop views: 2 global crops (random resized crop + flip only, since they feed the MAE target)
and ``n_local`` local crops (random resized crop, flip and colour augmentations), all drawn from one
``torch.Generator`` so a sample's views are a function of its seed.

Example:
    >>> import torch
    >>> crops = MultiCrop(global_size=(32, 24), local_size=(16, 16), n_local=2)
    >>> g, l = crops(torch.rand(3, 40, 30), torch.Generator().manual_seed(0))
    >>> [tuple(v.shape) for v in g + l]
    [(3, 32, 24), (3, 32, 24), (3, 16, 16), (3, 16, 16)]
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_GRAY = (0.299, 0.587, 0.114)


def _u(gen: torch.Generator, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo + (hi - lo) * float(torch.rand((), generator=gen))


def crop_box(h: int, w: int, out_size: tuple[int, int], scale: tuple[float, float],
             ratio: tuple[float, float], gen: torch.Generator) -> tuple[int, int, int, int]:
    """A random (top, left, height, width) box of area ``scale`` x the image area.

    The box's aspect (width / height) is the output's aspect times a log-uniform factor in
    ``ratio``; after 10 failed draws the largest box of the output's aspect is centred.
    """
    area = h * w
    out_aspect = out_size[1] / out_size[0]
    for _ in range(10):
        target = area * _u(gen, *scale)
        aspect = out_aspect * math.exp(_u(gen, math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            top = int(torch.randint(0, h - ch + 1, (), generator=gen))
            left = int(torch.randint(0, w - cw + 1, (), generator=gen))
            return top, left, ch, cw
    ch, cw = (h, max(1, min(w, int(round(h * out_aspect))))) if w / h >= out_aspect else \
        (max(1, min(h, int(round(w / out_aspect)))), w)
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def resized_crop(img: Tensor, box: tuple[int, int, int, int], out_size: tuple[int, int]) -> Tensor:
    """Crop ``box`` of a C x H x W image and resize it (bilinear, antialiased) to ``out_size``."""
    top, left, ch, cw = box
    patch = img[None, :, top : top + ch, left : left + cw]
    return F.interpolate(patch, size=tuple(out_size), mode="bilinear", align_corners=False,
                         antialias=True)[0]


def grayscale(img: Tensor) -> Tensor:
    """Luma of a 3 x H x W image, 1 x H x W."""
    w = torch.tensor(_GRAY, dtype=img.dtype).view(3, 1, 1)
    return (img * w).sum(dim=0, keepdim=True)


def gaussian_blur(img: Tensor, sigma: float) -> Tensor:
    """Separable Gaussian blur (radius ceil(3 sigma), replicate padding)."""
    radius = max(1, int(math.ceil(3.0 * sigma)))
    x = torch.arange(-radius, radius + 1, dtype=img.dtype)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    k = k / k.sum()
    c = img.shape[0]
    out = F.pad(img[None], (radius, radius, 0, 0), mode="replicate")
    out = F.conv2d(out, k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    out = F.pad(out, (0, 0, radius, radius), mode="replicate")
    return F.conv2d(out, k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)[0]


class MultiCrop:
    """Global and local views of one image in [0, 1], normalised with ImageNet mean/std.

    Args:
        global_size: (H, W) of the 2 global views.
        local_size: (H, W) of the local views.
        n_local: number of local views (0 allowed).
        n_global: number of global views (2 in Sapiens2).
        global_scale: area range of the global crops ([0.5, 1]).
        local_scale: area range of the local crops ([0.2, 0.7]).
        ratio: aspect factor range around the output's aspect.
        flip_prob: horizontal flip probability (every view).
        jitter_prob: probability of brightness/contrast/saturation jitter (local views only).
        brightness: jitter strength; factor in [1 - b, 1 + b].
        contrast: jitter strength.
        saturation: jitter strength.
        grayscale_prob: probability of grey-scale (local views only).
        blur_prob: probability of Gaussian blur (local views only).
        blur_sigma: sigma range in output pixels.
        solarize_prob: probability of solarisation (local views only).
    """

    def __init__(self, global_size=(256, 192), local_size=(112, 80), n_local: int = 4, n_global: int = 2,
                 global_scale=(0.5, 1.0), local_scale=(0.2, 0.7), ratio=(3 / 4, 4 / 3), flip_prob=0.5,
                 jitter_prob=0.8, brightness=0.4, contrast=0.4, saturation=0.2, grayscale_prob=0.2,
                 blur_prob=0.5, blur_sigma=(0.1, 2.0), solarize_prob=0.2):
        self.global_size, self.local_size = tuple(global_size), tuple(local_size)
        self.n_global, self.n_local = int(n_global), int(n_local)
        self.global_scale, self.local_scale = tuple(global_scale), tuple(local_scale)
        self.ratio = tuple(ratio)
        for name, (lo, hi) in (("global_scale", self.global_scale), ("local_scale", self.local_scale)):
            if not 0 < lo <= hi <= 1:
                raise ValueError(f"crops.{name} must satisfy 0 < lo <= hi <= 1, got {(lo, hi)}")
        self.flip_prob, self.jitter_prob = flip_prob, jitter_prob
        self.brightness, self.contrast, self.saturation = brightness, contrast, saturation
        self.grayscale_prob, self.blur_prob, self.blur_sigma = grayscale_prob, blur_prob, tuple(blur_sigma)
        self.solarize_prob = solarize_prob
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def _view(self, img: Tensor, size, scale, gen: torch.Generator, colour: bool) -> Tensor:
        box = crop_box(img.shape[1], img.shape[2], size, scale, self.ratio, gen)
        v = resized_crop(img, box, size).clamp(0.0, 1.0)
        if _u(gen) < self.flip_prob:
            v = v.flip(-1)
        if colour:
            v = self._colour(v, gen)
        return (v - self.mean) / self.std

    def _colour(self, v: Tensor, gen: torch.Generator) -> Tensor:
        if _u(gen) < self.jitter_prob:
            b = _u(gen, 1 - self.brightness, 1 + self.brightness)
            c = _u(gen, 1 - self.contrast, 1 + self.contrast)
            s = _u(gen, 1 - self.saturation, 1 + self.saturation)
            v = (v * b).clamp(0, 1)
            m = grayscale(v).mean()
            v = ((v - m) * c + m).clamp(0, 1)
            g = grayscale(v)
            v = ((v - g) * s + g).clamp(0, 1)
        if _u(gen) < self.grayscale_prob:
            v = grayscale(v).expand(3, -1, -1).clone()
        if _u(gen) < self.blur_prob:
            v = gaussian_blur(v, _u(gen, *self.blur_sigma))
        if _u(gen) < self.solarize_prob:
            v = torch.where(v >= 0.5, 1.0 - v, v)
        return v

    def __call__(self, img: Tensor, gen: torch.Generator) -> tuple[list[Tensor], list[Tensor]]:
        """Views of a 3 x H x W float image in [0, 1].

        Returns:
            ``(global views, local views)``: lists of 3 x h x w normalised tensors.
        """
        if img.dim() != 3 or img.shape[0] != 3:
            raise ValueError(f"MultiCrop expects a 3 x H x W image, got shape {tuple(img.shape)}")
        g = [self._view(img, self.global_size, self.global_scale, gen, False) for _ in range(self.n_global)]
        loc = [self._view(img, self.local_size, self.local_scale, gen, True) for _ in range(self.n_local)]
        return g, loc
