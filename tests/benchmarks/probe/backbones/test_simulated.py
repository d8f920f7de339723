"""The simulated paper-scale backbone: sapiens2_1b's feature shapes, deterministic, cheap, usable by name."""

from __future__ import annotations

import torch

NAME = "benchmarks.probe.backbones.simulated:SimulatedBackbone"


def test_sapiens2_1b_shapes_on_a_tiny_input():
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.protocol import ProbeProtocol

    bb = build_probe_backbone(NAME)
    layers = ProbeProtocol().tapped_layers(bb.num_layers)
    assert (bb.embed_dims, bb.num_layers, bb.patch_size, bb.has_cls) == (1536, 40, 16, True)
    assert layers == [9, 19, 29, 39]
    images = torch.rand(2, 3, 32, 48, generator=torch.Generator().manual_seed(0))
    feats, cls = bb.extract(images, layers)
    assert [tuple(f.shape) for f in feats] == [(2, 1536, 2, 3)] * 4
    assert [tuple(c.shape) for c in cls] == [(2, 1536)] * 4
    assert all(bool(torch.isfinite(f).all()) for f in feats)
    # a fresh instance (another process would do the same) gives bit-identical features
    again, _ = build_probe_backbone(NAME).extract(images, layers)
    assert all(torch.equal(a, b) for a, b in zip(feats, again))
    # the layers differ, the images matter, another seed is another backbone
    assert not torch.allclose(feats[0], feats[3])
    assert not torch.allclose(feats[0][0], feats[0][1])
    other, _ = build_probe_backbone({"type": NAME, "seed": 1}).extract(images, layers)
    assert not torch.allclose(other[0], feats[0])
    assert bb.describe()["seed"] == 0 and bb.describe()["params"] == 0


def test_1024x768_grid_is_64x48():
    from benchmarks.probe.backbones.simulated import SimulatedBackbone

    bb = SimulatedBackbone(embed_dims=8, rank=4)  # the 1b grid, narrow channels to keep the test light
    feats, cls = bb.extract(torch.rand(1, 3, 1024, 768), [39])
    assert tuple(feats[0].shape) == (1, 8, 64, 48) and tuple(cls[0].shape) == (1, 8)
