"""Task heads on random feature maps: layouts, shapes, norms and input checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sapiens2.models.heads import (
    AlbedoHead,
    NormalHead,
    PointmapHead,
    PoseHeatmapHead,
    RMSNorm2d,
    SegHead,
)
from sapiens2.models.heads.common import deconv_stack
from sapiens2.models.heads.pointmap import scale_branch_grid
from sapiens2.registry import MODELS

torch.manual_seed(0)


def _feat(c=16, h=4, w=3, b=2):
    return torch.randn(b, c, h, w)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_deconv_stack_doubles_size_for_each_kernel(k):
    stack = deconv_stack(8, [6, 4], [k, k])
    assert not any(isinstance(m, nn.ConvTranspose2d) and m.bias is not None for m in stack)
    assert stack(torch.randn(1, 8, 5, 7)).shape == (1, 4, 20, 28)


def test_deconv_stack_rejects_unknown_kernel():
    with pytest.raises(ValueError, match="kernel size"):
        deconv_stack(8, [4], [5])


def test_pose_head_shapes_and_layout():
    head = PoseHeatmapHead(16, out_channels=11, deconv_out_channels=[8, 8], deconv_kernel_sizes=[4, 4],
                           conv_out_channels=[6, 4], conv_kernel_sizes=[1, 3])
    out = head(_feat())
    assert out.shape == (2, 11, 16, 12)
    assert isinstance(head.deconv_layers[3], nn.ConvTranspose2d)
    assert isinstance(head.conv_layers[3], nn.Conv2d) and head.conv_layers[3].padding == (1, 1)
    assert isinstance(head.conv_layers[1], nn.InstanceNorm2d) and not head.conv_layers[1].affine


def test_heads_accept_backbone_tuples_and_use_the_last_map():
    head = SegHead(16, num_classes=5, deconv_out_channels=[8], deconv_kernel_sizes=[4])
    x = _feat()
    torch.testing.assert_close(head((torch.zeros(2, 3, 1, 1), x)), head(x))


def test_seg_head_without_convs():
    head = SegHead(16, num_classes=5, deconv_out_channels=[8, 8, 8, 8], deconv_kernel_sizes=[4, 4, 4, 4])
    assert head(_feat()).shape == (2, 5, 64, 48)
    assert head.conv_seg.in_channels == 8


@pytest.mark.parametrize("cls,pred", [(NormalHead, "conv_normal"), (AlbedoHead, "conv_albedo")])
def test_pixel_shuffle_heads(cls, pred):
    head = cls(16, upsample_channels=[8, 4], conv_out_channels=[4, 2], conv_kernel_sizes=[3, 3])
    assert head(_feat()).shape == (2, 3, 16, 12)
    assert isinstance(getattr(head, pred), nn.Conv2d)
    norms = [m for m in head.modules() if isinstance(m, (nn.InstanceNorm2d, RMSNorm2d))]
    assert len(norms) == 5  # input conv, 2 upsample blocks, 2 convs
    want = RMSNorm2d if cls is AlbedoHead else nn.InstanceNorm2d
    assert all(isinstance(m, want) for m in norms)
    keys = set(head.state_dict())
    assert ("upsample_blocks.1.2.norm.weight" in keys) == (cls is AlbedoHead)


def test_rmsnorm2d_normalises_channels():
    norm = RMSNorm2d(4)
    with torch.no_grad():
        norm.norm.weight.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    x = torch.randn(2, 4, 3, 5)
    ref = x / torch.sqrt(x.pow(2).mean(1, keepdim=True) + 1e-6) * norm.norm.weight.view(1, 4, 1, 1)
    torch.testing.assert_close(norm(x), ref)


def test_pointmap_head_outputs_pointmap_and_scale():
    grid = scale_branch_grid(8, 7, [1, 1])
    assert grid == (2, 2)
    head = PointmapHead(16, upsample_channels=[8], conv_out_channels=[4], conv_kernel_sizes=[3],
                        scale_conv_out_channels=[8, 4], scale_conv_kernel_sizes=[1, 1],
                        scale_final_layer=[4 * grid[0] * grid[1], 6, 1])
    pointmap, scale = head(_feat(h=8, w=7))
    assert pointmap.shape == (2, 3, 16, 14) and scale.shape == (2, 1)
    assert [type(m) for m in head.scale_final_layer] == [nn.Flatten, nn.Linear, nn.SiLU, nn.Linear]


def test_official_scale_mlp_size_follows_from_the_input_size():
    # Official: 1024x768 input, patch 16 -> 64x48 grid; three stride-2 1x1 convs -> 8x6; 128 channels.
    h, w = scale_branch_grid(64, 48, [1, 1, 1])
    assert 128 * h * w == 6144


def test_pointmap_head_rejects_a_wrong_input_size():
    head = PointmapHead(16, upsample_channels=[8], scale_conv_out_channels=[4], scale_conv_kernel_sizes=[1],
                        scale_final_layer=[4 * 2 * 2, 1])
    with pytest.raises(ValueError, match="scale_final_layer"):
        head(_feat(h=8, w=12))


def test_heads_check_channels_and_list_lengths():
    head = NormalHead(16, upsample_channels=[8])
    with pytest.raises(ValueError, match="16 channels"):
        head(_feat(c=12))
    with pytest.raises(ValueError, match="B x C x H x W"):
        head(torch.randn(2, 16, 4))
    with pytest.raises(ValueError, match="same length"):
        PoseHeatmapHead(16, deconv_out_channels=[8, 8], deconv_kernel_sizes=[4])


def test_heads_build_from_registry_with_loss_decode():
    cfg = dict(type="PoseHeatmapHead", in_channels=16, out_channels=3, deconv_out_channels=[8],
               deconv_kernel_sizes=[4], loss_decode=dict(type="KeypointMSELoss", use_target_weight=True))
    head = MODELS.build(cfg)
    assert isinstance(head, PoseHeatmapHead) and head.loss_decode["type"] == "KeypointMSELoss"
