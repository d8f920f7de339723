"""The random conv net plug-in of docs/design/random_features.md: it builds
through the probe's backbone spec, extracts features of the declared shape, and its stated receptive
field is the one the convolutions have."""

from __future__ import annotations

import pytest
import torch

from benchmarks.analysis.random_convnet import RandomConvNet
from benchmarks.probe.backbones.presets import backbone_label, build_probe_backbone

SPEC = "benchmarks.analysis.random_convnet:RandomConvNet"


@pytest.mark.parametrize(
    ("width", "strides", "kernels", "patch", "rf"),
    [(32, (4, 4), (4, 4), 16, 16), (16, (4, 2), (4, 4), 8, 16), (24, (4, 4), (4, 12), 16, 48)],
)
def test_builds_from_a_json_spec_and_extracts_the_declared_shape(width, strides, kernels, patch, rf):
    cfg = {"type": SPEC, "name": "convnet_x", "width": width, "strides": list(strides),
           "kernels": list(kernels)}
    bb = build_probe_backbone(cfg, img_size=(64, 48))
    assert backbone_label(cfg) == "convnet_x"
    assert (bb.patch_size, bb.embed_dims, bb.num_layers, bb.has_cls) == (patch, width, 1, False)
    assert bb.weights == "random(seed=0)" and bb.receptive_field == rf
    feats, cls = bb.extract(torch.rand(2, 3, 64, 40), [0])  # 40: padded to a patch multiple
    assert cls is None and len(feats) == 1
    assert tuple(feats[0].shape) == (2, width, 64 // patch, -(-40 // patch))
    assert torch.isfinite(feats[0]).all() and feats[0].std() > 0
    desc = bb.describe()
    assert desc["receptive_field"] == rf and desc["strides"] == list(strides) and desc["params"] > 0


def test_the_seed_fixes_the_weights():
    a, b = (build_probe_backbone({"type": SPEC, "width": 8}, init_seed=0) for _ in range(2))
    c = build_probe_backbone({"type": SPEC, "width": 8}, init_seed=1)
    assert torch.equal(a.conv2.weight, b.conv2.weight) and not torch.equal(a.conv2.weight, c.conv2.weight)


@pytest.mark.parametrize(("strides", "kernels"), [((4, 4), (4, 12)), ((4, 2), (4, 4)), ((4, 4), (4, 4))])
def test_receptive_field_is_the_support_of_one_features_input_gradient(strides, kernels):
    bb = RandomConvNet(width=4, strides=strides, kernels=kernels).double()
    x = torch.randn(1, 3, 128, 128, dtype=torch.float64, requires_grad=True)
    (feats,), _ = bb.forward_layers(x, [0])
    f = feats[0]  # C x h x w
    f[:, f.shape[1] // 2, f.shape[2] // 2].sum().backward()
    rows, cols = (x.grad[0].abs().sum(0) > 0).nonzero(as_tuple=True)
    assert rows.max() - rows.min() + 1 == bb.receptive_field
    assert cols.max() - cols.min() + 1 == bb.receptive_field


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"width": 0}, "width must be >= 1"), ({"kernels": (3, 4)}, "kernel 3 with stride 4"),
     ({"strides": (4, 2), "kernels": (4, 3)}, "kernel 3 with stride 2"), ({"strides": (4,)}, "pairs")],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RandomConvNet(**kwargs)
