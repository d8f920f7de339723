"""The Sapiens2 pretraining objective (sapiens2.pretrain), piece by piece.

Each loss term is checked against a direct computation on tiny tensors (MAE on normalised targets
over masked tokens only, the distillation cross-entropy with centring, temperatures and its view
pairs, KoLeo against a brute-force nearest neighbour); the masking statistics over many draws; the
masked encoder (no leak from masked tokens, the 4K model masked after its local stage); the crops,
EMA, schedules and weight-decay groups. End-to-end runs are in test_pretrain_run.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sapiens2.models.backbones.common import SAPIENS2_ARCHS
from sapiens2.pretrain.crops import MultiCrop, crop_box
from sapiens2.pretrain.distill import (
    Centering,
    distillation_loss,
    distillation_pairs,
    ema_update,
    sinkhorn_knopp,
    teacher_temperature,
)
from sapiens2.pretrain.encoder import encode
from sapiens2.pretrain.koleo import koleo_loss
from sapiens2.pretrain.mae import mae_loss, normalized_targets, patchify
from sapiens2.pretrain.masking import MixedBlockMasking, mask_count
from sapiens2.pretrain.optim import lr_at, param_groups
from sapiens2.pretrain.recipes import get_recipe
from sapiens2.pretrain.registry import build

TINY = {"embed_dims": 64, "num_layers": 4, "num_heads": 4, "feedforward_channels": 128}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------------------------- MAE
def test_patchify_layout_and_normalised_targets():
    x = torch.randn(2, 3, 4, 6)
    p = patchify(x, 2)
    assert p.shape == (2, 6, 12)
    # token (row 1, column 2) of image 1 holds pixels [2:4, 4:6], flattened as (row, col, channel)
    expect = x[1, :, 2:4, 4:6].permute(1, 2, 0).reshape(-1)
    assert torch.equal(p[1, 1 * 3 + 2], expect)
    t = normalized_targets(p, eps=1e-6)
    v = p[0, 4]
    direct = (v - v.mean()) / math.sqrt(float(((v - v.mean()) ** 2).mean()) + 1e-6)
    assert torch.allclose(t[0, 4], direct, atol=1e-6)


def test_mae_loss_is_mse_over_masked_tokens_only():
    g = torch.Generator().manual_seed(0)
    pred, target = torch.randn(2, 5, 3, generator=g), torch.randn(2, 5, 3, generator=g)
    mask = torch.tensor([[1, 0, 1, 0, 0], [0, 0, 1, 1, 1]], dtype=torch.bool)
    direct, n = 0.0, 0
    for b in range(2):
        for i in range(5):
            if mask[b, i]:
                direct += sum((float(pred[b, i, d]) - float(target[b, i, d])) ** 2 for d in range(3)) / 3
                n += 1
    assert float(mae_loss(pred, target, mask)) == pytest.approx(direct / n, rel=1e-6)
    changed = pred.clone()
    changed[~mask] += 100.0  # visible tokens do not count
    assert float(mae_loss(changed, target, mask)) == pytest.approx(direct / n, rel=1e-6)


def test_pretrainer_mae_term_uses_normalised_pixel_targets():
    """The model's MAE term equals the MSE to per-patch normalised pixels of the global views."""
    torch.manual_seed(0)
    cfg = get_recipe("smoke_tiny")["model"]
    cfg["loss_weights"] = {"mae": 1.0, "cl": 0.0, "koleo": 0.0}
    model = build(cfg)
    globals_ = torch.randn(4, 3, 32, 24)
    draw = model.masking(4, (4, 3), torch.Generator().manual_seed(1))
    batch = {"globals": globals_, "locals": None, "mask": draw.mask, "ids_keep": draw.ids_keep}
    out = model.student(globals_, None, draw.ids_keep)
    got = model.losses(out, batch, 0)
    assert set(got) == {"loss", "mae"} and model.teacher is None
    target = normalized_targets(patchify(globals_, 8))
    direct = ((out.pred - target) ** 2).mean(-1)[draw.mask].mean()
    assert float(got["mae"].detach()) == pytest.approx(float(direct.detach()), rel=1e-5)


# ---------------------------------------------------------------------------------- distillation
def test_distillation_pairs_are_cross_view_global_global_and_global_local():
    pairs = distillation_pairs(2, 5)
    assert (0, 0) not in pairs and (1, 1) not in pairs
    assert (0, 1) in pairs and (1, 0) in pairs
    assert all(t < 2 for t, _ in pairs)  # only global views are teacher targets: no local<->local
    assert len(pairs) == 2 * 1 + 2 * 3


def test_distillation_cross_entropy_with_centring_and_temperatures():
    g = torch.Generator().manual_seed(0)
    b, k, n_views = 3, 5, 4
    student = [torch.randn(b, k, generator=g) for _ in range(n_views)]
    teacher_logits = torch.randn(2 * b, k, generator=g)
    centre = Centering(k, momentum=0.9)
    centre.center.copy_(torch.randn(1, k, generator=g))
    t_temp, s_temp = 0.065, 0.1
    probs = centre.probs(teacher_logits, t_temp).chunk(2)
    got = float(distillation_loss(student, list(probs), s_temp))

    def softmax(v):
        e = [math.exp(x - max(v)) for x in v]
        return [x / sum(e) for x in e]

    c = centre.center[0].tolist()
    total, count = 0.0, 0
    for t in range(2):
        for s in range(n_views):
            if s == t:
                continue
            for i in range(b):
                p = softmax([(teacher_logits[t * b + i, j].item() - c[j]) / t_temp for j in range(k)])
                q = softmax([student[s][i, j].item() / s_temp for j in range(k)])
                total += -sum(pj * math.log(qj) for pj, qj in zip(p, q))
                count += 1
    assert got == pytest.approx(total / count, rel=1e-5)


def test_centring_update_and_teacher_temperature_schedule():
    centre = Centering(3, momentum=0.9)
    centre.center.fill_(1.0)
    logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    centre.update(logits)
    assert torch.allclose(centre.center, 0.9 * torch.ones(1, 3) + 0.1 * torch.tensor([[2.0, 3.0, 4.0]]))
    assert teacher_temperature(0, 0.065, 0.07, 100) == 0.065
    assert teacher_temperature(50, 0.065, 0.07, 100) == pytest.approx(0.0675)
    assert teacher_temperature(100, 0.065, 0.07, 100) == teacher_temperature(10**6, 0.065, 0.07, 100) == 0.07


def _sinkhorn_direct(logits: np.ndarray, temp: float, iterations: int) -> np.ndarray:
    """Sinkhorn-Knopp written out on a B x K matrix: prototype columns to mass 1/K, image rows to 1/B."""
    p = np.exp(logits / temp)
    p = p / p.sum()
    b, k = p.shape
    for _ in range(iterations):
        for j in range(k):
            p[:, j] = p[:, j] / p[:, j].sum() / k
        for i in range(b):
            p[i, :] = p[i, :] / p[i, :].sum() / b
    return p * b


def test_sinkhorn_knopp_against_a_direct_computation():
    g = torch.Generator().manual_seed(0)
    logits = torch.rand(6, 5, generator=g) * 2 - 1  # cosines
    q = sinkhorn_knopp(logits, 0.07, iterations=3)
    assert np.allclose(q.numpy(), _sinkhorn_direct(logits.double().numpy(), 0.07, 3), rtol=1e-5, atol=1e-7)
    assert torch.allclose(q.sum(1), torch.ones(6))
    # many iterations: every prototype gets the same mass over the batch, B / K
    q = sinkhorn_knopp(logits, 0.07, iterations=200)
    assert torch.allclose(q.sum(0), torch.full((5,), 6 / 5), atol=1e-4)
    # identical images (the [CLS] at initialisation) still get a valid, balanced target
    same = sinkhorn_knopp(logits[:1].repeat(4, 1), 0.07)
    assert torch.allclose(same.sum(1), torch.ones(4)) and torch.isfinite(same).all()


def test_pretrainer_rejects_an_unknown_teacher_centering():
    cfg = get_recipe("smoke_tiny")["model"]
    with pytest.raises(ValueError, match="teacher_centering"):
        build({**cfg, "teacher_centering": "median"})
    assert build({**cfg, "teacher_centering": "sinkhorn"}).teacher_centering == "sinkhorn"


def test_ema_update_formula():
    torch.manual_seed(0)
    teacher, student = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    ema_update(teacher, student, 0.992)
    for k, v in teacher.state_dict().items():
        assert torch.allclose(v, 0.992 * before[k] + 0.008 * student.state_dict()[k], atol=1e-7)
    with pytest.raises(KeyError, match="differ"):
        ema_update(teacher, torch.nn.Linear(3, 2, bias=False), 0.9)


# --------------------------------------------------------------------------------------- KoLeo
def test_koleo_matches_brute_force_nearest_neighbour():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 5, generator=g)
    xs = [v / np.linalg.norm(v) for v in x.double().numpy()]
    direct = 0.0
    for i, xi in enumerate(xs):
        nearest = min(np.linalg.norm(xi - xj) for j, xj in enumerate(xs) if j != i)
        direct += -math.log(nearest + 1e-8)
    assert float(koleo_loss(x)) == pytest.approx(direct / len(xs), rel=1e-5)
    with pytest.raises(ValueError, match="B >= 2"):
        koleo_loss(torch.randn(1, 5))


# -------------------------------------------------------------------------------------- masking
@pytest.mark.parametrize("grid", [(4, 3), (8, 6), (5, 3), (64, 48)])
def test_mask_ratio_is_exact(grid):
    masking = MixedBlockMasking(ratio=0.75, block_prob=0.4)
    draw = masking(12, grid, torch.Generator().manual_seed(0))
    n = grid[0] * grid[1]
    count = mask_count(n, 0.75)
    assert count == math.floor(0.75 * n + 0.5)
    assert draw.mask.sum(1).tolist() == [count] * 12
    for m, keep in zip(draw.mask, draw.ids_keep):
        assert keep.tolist() == (~m).nonzero().squeeze(1).tolist()


def test_blockwise_fraction_and_block_structure():
    masking = MixedBlockMasking(ratio=0.75, block_prob=0.4)
    draw = masking(2000, (8, 6), torch.Generator().manual_seed(1))
    frac = float(draw.blockwise.float().mean())
    assert abs(frac - 0.4) < 0.045, frac  # 4 standard errors of a Bernoulli(0.4) mean over 2000 draws
    # Blockwise masks leave the visible tokens clumped: more visible-visible neighbour pairs.
    vis = (~draw.mask).view(-1, 8, 6).float()
    pairs = (vis[:, 1:] * vis[:, :-1]).sum((1, 2)) + (vis[:, :, 1:] * vis[:, :, :-1]).sum((1, 2))
    assert float(pairs[draw.blockwise].mean()) > 1.5 * float(pairs[~draw.blockwise].mean())
    assert not MixedBlockMasking(block_prob=0.0)(50, (8, 6), torch.Generator()).blockwise.any()
    assert MixedBlockMasking(block_prob=1.0)(50, (8, 6), torch.Generator()).blockwise.all()


# -------------------------------------------------------------------------------------- encoder
def _backbone(**kw):
    torch.manual_seed(0)
    model = build(dict(type="Sapiens2", arch=dict(TINY), img_size=(32, 24), patch_size=8, **kw))
    for name, p in model.named_parameters():  # LayerScale 1 so attention mixes tokens visibly
        if name.endswith("gamma.weight"):
            p.data.fill_(1.0)
    return model.eval()


def test_masked_encoder_sees_only_visible_tokens():
    bb = _backbone()
    x = torch.randn(2, 3, 32, 24)
    full, grid = encode(bb, x)
    raw = bb.forward_intermediates  # the plain forward's output for ids_keep = all
    assert grid == (4, 3)
    assert torch.allclose(full[:, 9:].transpose(1, 2).reshape(2, 64, 4, 3), raw(x, [-1])[0][0], atol=1e-5)
    all_ids = torch.arange(12).expand(2, 12)
    assert torch.allclose(encode(bb, x, all_ids)[0], full, atol=1e-6)
    keep = torch.tensor([[0, 4, 11], [1, 2, 3]])
    out, _ = encode(bb, x, keep)
    assert out.shape == (2, 9 + 3, 64)
    y = x.clone()
    y[0, :, 8:16, 0:8] += 5.0  # token 3 of image 0 is masked: no effect
    assert torch.allclose(encode(bb, y, keep)[0], out, atol=1e-6)
    y[0, :, 8:16, 8:16] += 5.0  # token 4 of image 0 is visible
    assert not torch.allclose(encode(bb, y, keep)[0][0], out[0], atol=1e-4)


def test_4k_tokenizer_masks_after_the_local_stage():
    torch.manual_seed(0)
    arch = {**TINY, "num_tokenizer_layers": 1}
    cfg = get_recipe("smoke_tiny")["model"]
    cfg["backbone"] = dict(type="Sapiens2", arch=arch, img_size=(64, 48), patch_size=4, use_tokenizer=True)
    model = build(cfg)
    bb = model.student.backbone
    assert model.patch == 16  # one token per 4x4 window of 4-pixel patches
    x = torch.randn(2, 3, 64, 48)
    keep = torch.tensor([[0, 5, 11], [1, 2, 3]])
    out, grid = encode(bb, x, keep)
    assert grid == (4, 3)
    y = x.clone()
    y[0, :, 16:32, 0:16] += 5.0  # window 3 of image 0 is masked: the local stage cannot leak it
    assert torch.allclose(encode(bb, y, keep)[0], out, atol=1e-6)
    # A full training step: 2 global views x 2 images, 1 local view x 2 images.
    globals_ = torch.randn(4, 3, 64, 48)
    draw = model.masking(4, grid, torch.Generator().manual_seed(0))
    res = model.student(globals_, torch.randn(2, 3, 32, 32), draw.ids_keep)
    assert res.pred.shape == (4, 12, 16 * 16 * 3) and res.logits.shape == (6, 64)
    batch = {"globals": globals_, "locals": None, "mask": draw.mask, "ids_keep": draw.ids_keep}
    losses = model.losses(res, batch, 0)
    assert set(losses) == {"loss", "mae", "cl", "koleo"}
    losses["loss"].backward()
    assert all(torch.isfinite(v) for v in losses.values())


@pytest.mark.parametrize("arch", sorted(SAPIENS2_ARCHS))
def test_every_official_arch_builds(arch):
    cfg = get_recipe("paper_1b")["model"]
    cfg["backbone"]["arch"] = arch
    with torch.device("meta"):
        model = build(cfg)
    assert model.student.decoder.embed.in_features == model.student.backbone.embed_dims
    assert model.teacher.backbone.embed_dims == model.student.backbone.embed_dims
    cfg["backbone"]["use_tokenizer"] = True
    with torch.device("meta"):
        assert build(cfg).patch == 64


# ------------------------------------------------------------------------------- crops & optim
def test_global_views_have_no_colour_augmentation():
    crops = MultiCrop(global_size=(32, 24), local_size=(16, 16), n_local=4, jitter_prob=1.0)
    img = torch.empty(3, 48, 36)
    img[:] = torch.tensor([0.2, 0.5, 0.7]).view(3, 1, 1)
    expect = ((torch.tensor([0.2, 0.5, 0.7]) - crops.mean.view(3)) / crops.std.view(3)).view(3, 1, 1)
    local_changed = 0
    for seed in range(10):
        g, loc = crops(img, torch.Generator().manual_seed(seed))
        for v in g:
            assert torch.allclose(v, expect.expand_as(v), atol=1e-5)
        local_changed += sum(not torch.allclose(v, expect.expand_as(v), atol=1e-3) for v in loc)
    assert local_changed > 20


def test_crop_box_scales():
    g = torch.Generator().manual_seed(0)
    for scale in ((0.5, 1.0), (0.2, 0.7)):
        for _ in range(200):
            top, left, h, w = crop_box(96, 72, (32, 24), scale, (3 / 4, 4 / 3), g)
            assert 0 <= top and top + h <= 96 and 0 <= left and left + w <= 72
            assert scale[0] * 0.9 <= h * w / (96 * 72) <= scale[1] * 1.1


def test_weight_decay_groups():
    model = build(get_recipe("smoke_tiny")["model"])
    decay, no_decay = param_groups(model.student, 0.05)
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    names_d, names_n = set(decay["names"]), set(no_decay["names"])
    trainable = {n for n, p in model.student.named_parameters() if p.requires_grad}
    assert names_d | names_n == trainable and not names_d & names_n
    for n in ("backbone.cls_token", "backbone.storage_tokens", "decoder.mask_token", "backbone.ln1.weight",
              "backbone.blocks.0.attn.q_norm.weight", "backbone.blocks.0.attn.wq.bias",
              "backbone.blocks.0.attn.gamma.weight", "decoder.blocks.0.ln1.weight", "head.mlp.0.bias"):
        assert n in names_n, n
    for n in ("backbone.patch_embed.projection.weight", "backbone.blocks.0.attn.wq.weight",
              "backbone.blocks.3.ffn.w12.weight", "decoder.pred.weight", "head.prototypes"):
        assert n in names_d, n
    assert not any(n.startswith("teacher") for n in trainable)


def test_lr_schedule_warmup_then_cosine():
    lrs = [lr_at(s, 1.0, warmup_steps=4, total_steps=12, min_lr=0.1) for s in range(13)]
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert lrs[4] == 1.0 and lrs[12] == pytest.approx(0.1)
    assert lrs[8] == pytest.approx(0.1 + 0.9 * 0.5)
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:]))


def test_one_step_reaches_every_trainable_parameter():
    """Every student parameter (backbone, decoder, head) gets a non-zero gradient from the objective."""
    torch.manual_seed(0)
    model = build(get_recipe("smoke_tiny")["model"])
    globals_, locals_ = torch.randn(8, 3, 32, 24), torch.randn(8, 3, 16, 16)
    draw = model.masking(8, (4, 3), torch.Generator().manual_seed(0))
    batch = {"globals": globals_, "locals": locals_, "mask": draw.mask, "ids_keep": draw.ids_keep}
    model.losses(model.student(globals_, locals_, draw.ids_keep), batch, 0)["loss"].backward()
    dead = [n for n, p in model.student.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not dead, dead
    assert all(p.grad is None for p in model.teacher.parameters())
