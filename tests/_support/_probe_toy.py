"""Tiny in-memory data in the sample-dict formats, for probe tests that must not depend on the
synthetic renderer (a blob "person" whose GT for all five tasks comes from the same ellipsoid)."""

from __future__ import annotations

import math

import torch

from benchmarks.probe.data.source import MemoryData
from benchmarks.probe.tasks import probe_task_class, probe_task_names


def _scene(index: int, size: tuple[int, int], gen: torch.Generator) -> dict:
    h, w = size
    ys, xs = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
    cx, cy = (
        w * (0.35 + 0.3 * torch.rand(1, generator=gen).item()),
        h * (0.4 + 0.2 * torch.rand(1, generator=gen).item()),
    )
    ax, ay = w * 0.22, h * 0.35
    u, v = (xs - cx) / ax, (ys - cy) / ay
    r2 = u**2 + v**2
    mask = r2 < 1
    nz = torch.sqrt((1 - r2).clamp_min(0))
    normal = torch.stack([u, v, -nz]) * mask
    normal = torch.nn.functional.normalize(normal, dim=0) * mask
    colour = torch.rand(3, generator=gen)
    albedo = torch.where(mask, colour[:, None, None].expand(3, h, w), torch.zeros(3, h, w))
    label = torch.zeros(h, w, dtype=torch.int64)
    label[mask & (v < -0.5)] = 3
    label[mask & (v >= -0.5) & (v < 0.3)] = 22
    label[mask & (v >= 0.3)] = 13
    f = 200.0
    depth = 3.0 - 0.5 * nz
    pointmap = torch.stack([(xs - w / 2) * depth / f, (ys - h / 2) * depth / f, depth]) * mask
    bg = 0.3 + 0.4 * torch.rand(3, 1, 1, generator=gen)
    shade = (0.4 + 0.6 * nz).clamp(0, 1)
    image = torch.where(mask, albedo * shade, bg.expand(3, h, w)).float()
    ang = torch.linspace(0, 2 * math.pi, 309)[:-1] * 7
    rad = torch.linspace(0.1, 0.9, 308)
    kpts = torch.stack([cx + ax * rad * torch.cos(ang), cy + ay * rad * torch.sin(ang)], 1)
    vis = torch.ones(308)
    K = torch.tensor([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1.0]])
    return {
        "index": index,
        "id": f"toy{index}",
        "image": image,
        "label": label,
        "normal": normal,
        "mask": mask,
        "pointmap": pointmap.float(),
        "K": K,
        "albedo": albedo,
        "keypoints": kpts,
        "visibility": vis,
    }


def make_toy_data(n_train=8, n_test=4, size=(64, 48), seed=0, tasks=None):
    """MemoryData with the same scenes for every task (None: every probe task the scenes have GT for)."""
    gen = torch.Generator().manual_seed(seed)
    train = [_scene(i, size, gen) for i in range(n_train)]
    test = [_scene(1000 + i, size, gen) for i in range(n_test)]
    if tasks is None:
        tasks = [t for t in probe_task_names() if set(probe_task_class(t).required_keys) <= set(train[0])]
    return MemoryData({t: {"train": train, "test": test} for t in tasks}, name="toy")


def fit_readouts(data, names, protocol, stream_of, alphas=None):
    """The streamed spine's read-outs of ``names`` on ``data``'s train split: (``{task: read-out}``,
    ``{task: ProbeTask}``, ``{split: SceneLoader}``); ``stream_of(tasks)`` builds the feature stream."""
    from benchmarks.probe.data.loader import SceneLoader
    from benchmarks.probe.readout.stream import fit_group
    from benchmarks.probe.tasks import build_task

    tasks = {t: build_task(t, protocol) for t in names}
    loaders = {s: SceneLoader(data, tasks, s, protocol) for s in (protocol.train_split, protocol.test_split)}
    stream = stream_of(tasks)
    fits, train = {}, loaders[protocol.train_split]
    for group in train.groups:
        fits.update(fit_group(train, group, tasks, stream, protocol, alphas=alphas)[0])
    return fits, tasks, loaders


def pixels_stream(protocol):
    """The raw-pixel backbone's feature stream (``stream_of`` of :func:`fit_readouts`)."""
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.features.store import FeatureStore
    from benchmarks.probe.readout.feature_streams import BackboneStream

    store = FeatureStore(build_probe_backbone("pixels"), [0], protocol)
    return lambda tasks: BackboneStream(store, protocol.input_size)
