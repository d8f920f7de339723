"""Backbones: golden parity, official keys/shapes/parameter counts, attention paths, RoPE precision,
the 4K tokenizer, input validation, freezing and the probing contract."""

from __future__ import annotations

import json

import pytest
import torch

from sapiens2.models.backbones import (
    OFFICIAL_BACKBONES,
    Sapiens,
    Sapiens2,
    arch_settings,
    kv_heads_per_layer,
    list_archs,
)
from sapiens2.registry import MODELS

CLASSES = {"Sapiens2": Sapiens2, "Sapiens": Sapiens}
TINY = dict(embed_dims=32, num_layers=18, num_heads=4, feedforward_channels=64, num_tokenizer_layers=2)
TINY_V1 = dict(embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)


def _manifest(golden_models):
    path = golden_models / "manifest.json"
    assert path.is_file(), f"golden model manifest missing at {path} (../shared incomplete)"
    return json.loads(path.read_text())


def _backbone_cases(golden_models):
    manifest = _manifest(golden_models)
    cases = [c for c in manifest["cases"] if c["official_config"]["type"] in CLASSES]
    assert cases, f"no backbone cases in the golden manifest {golden_models / 'manifest.json'}"
    return manifest, cases


def _build_case(case: dict, manifest: dict):
    cfg = dict(case["official_config"])
    cls = CLASSES[cfg.pop("type")]
    arch = cfg["arch"]
    cfg["arch"] = manifest.get("arch_settings", {}).get(arch, arch)
    return cls(**cfg)


def _case_outputs(model, x: torch.Tensor, names) -> dict[str, torch.Tensor]:
    """Compute golden output names ``raw_layer5``, ``featmap_last``, ``cls_token_last``, ..."""
    results = {}
    for name in names:
        kind, which = name.rsplit("_", 1)
        model.out_type = kind
        outs = model(x)
        results[name] = outs[-1] if which == "last" else outs[model.out_indices.index(int(which[5:]))]
    return results


def _load_case(golden_models, case):
    from safetensors.torch import load_file

    tensors = load_file(str(golden_models / case["file"]))
    state = {k[len("state_dict.") :]: v for k, v in tensors.items() if k.startswith("state_dict.")}
    return (
        state,
        tensors["input"],
        {k[len("output.") :]: v for k, v in tensors.items() if k.startswith("output.")},
    )


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "eager"])
def test_golden_backbone_cases(golden_models, fast):
    manifest, cases = _backbone_cases(golden_models)
    report = []
    for case in cases:
        model = _build_case(case, manifest)
        state, x, expected = _load_case(golden_models, case)
        model.load_state_dict(state, strict=True)
        model.eval()
        model.fast_attention = fast
        with torch.no_grad():
            got = _case_outputs(model, x, expected)
        errors = {k: (got[k] - expected[k]).abs().max().item() for k in expected}
        worst = max(errors.values())
        report.append(f"{case['name']}: max {worst:.3g} {errors}")
        assert worst <= case["tolerance"]["abs"], f"{case['name']} outside tolerance: {errors}"
    print("\n".join(report))


def test_official_keys_shapes_and_param_counts(shared_dir):
    ref = json.loads((shared_dir / "reference" / "official_backbones.json").read_text())
    entries = {**ref["archs"], **ref["sapiens_v1_archs"]}
    assert len(ref["archs"]) == 6 and len(ref["sapiens_v1_archs"]) == 4
    for name, entry in entries.items():
        ctor = dict(entry["constructor"])
        cls = Sapiens2 if name in ref["archs"] else Sapiens
        with torch.device("meta"):
            model = cls(**ctor)
        shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
        assert shapes == entry["state_dict"], (
            f"{name}: keys/shapes differ: {set(shapes) ^ set(entry['state_dict'])}"
        )
        assert sum(p.numel() for p in model.parameters()) == entry["num_params"], name
        ours = dict(OFFICIAL_BACKBONES[name])
        assert CLASSES[ours.pop("type")] is cls
        assert {k: list(v) if isinstance(v, tuple) else v for k, v in ours.items()} == {
            k: v for k, v in ctor.items() if k != "patch_size"
        }
        if name in ref["archs"]:
            assert arch_settings(ctor["arch"]) == entry["settings"]


def _shrunk(settings: dict) -> dict:
    """Keep the depth and head layout of an arch (hence its GQA pattern) with head width 4."""
    small = dict(settings, embed_dims=4 * settings["num_heads"])
    small["feedforward_channels"] = 2 * small["embed_dims"]
    return small


@pytest.mark.parametrize("name", list_archs())
def test_every_arch_runs_shrunk(name):
    settings = _shrunk(arch_settings(name))
    cls = Sapiens2 if name.startswith("sapiens2_") else Sapiens
    kwargs = dict(img_size=(32, 32), out_indices=[0, -1], out_type="raw")
    model = cls(settings, **kwargs).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 32, 48))
    prefix = 9 if cls is Sapiens2 else 1
    assert [tuple(o.shape) for o in outs] == [(1, prefix + 6, settings["embed_dims"])] * 2
    assert all(torch.isfinite(o).all() for o in outs)
    if cls is Sapiens2:
        kv = [blk.attn.num_kv_heads for blk in model.blocks]
        assert kv == kv_heads_per_layer(settings["num_layers"], settings["num_heads"])
        assert sum(k != settings["num_heads"] for k in kv) == max(0, settings["num_layers"] - 16)


def _sdpa_backend(name: str):
    """The default SDPA kernel choice, or one forced backend (another summation order)."""
    from contextlib import nullcontext

    from torch.nn.attention import SDPBackend, sdpa_kernel

    return nullcontext() if name == "default" else sdpa_kernel([getattr(SDPBackend, name.upper())])


@pytest.mark.parametrize("sdpa", ["default", "math"])
@pytest.mark.parametrize("tokenizer", [False, True], ids=["plain", "tokenizer"])
def test_fast_equals_eager(tokenizer, sdpa):
    """Whole model, float32 RoPE: SDPA and the eager path agree to float32 rounding noise.

    Two correct attention kernels differ only in the order of their float32 sums (here over at most
    ~200 tokens and 8 channels): a few float32 eps (1.2e-7) per block, relative to the activations,
    and float32 RoPE does not amplify that (nothing is re-rounded to a coarser type). The bound,
    1e-5 of the output's largest magnitude (~80 eps), holds for any kernel that computes
    softmax(q k^T / sqrt(d)) v in float32: measured 3e-7 relative on the dev machine (2 CPU cores,
    2026-11-30) with both the default and the forced "math" SDPA backend. A real difference between
    the paths (scale, K/V grouping, softmax axis, RoPE) is 1e-2 relative or more; a 1% error in
    the eager scale fails here at 1.3e-4 relative.

    The whole model is not compared with bfloat16 RoPE: q and k are rounded to bfloat16 in every
    block, the kernels' float32 noise flips some of those roundings, and the flips cascade through
    18 blocks by an amount the kernels decide (tokenizer model: fast vs eager 1.0e-3 on one machine,
    7.6e-5 with the default backend and 7.5e-4 with the "math" backend here, against a 5.0e-3
    bf16-vs-fp32 RoPE gap). bfloat16 RoPE is checked block by block in
    :func:`test_fast_equals_eager_bf16_rope_per_block`, where no kernel can move the ratio.
    """
    torch.manual_seed(0)
    kw = dict(out_indices=[3, 9, 17], out_type="raw", use_tokenizer=tokenizer, layer_scale_init_value=1.0)
    model = Sapiens2(TINY, pos_embed_rope_dtype="fp32", **kw).eval()
    x = torch.randn(2, 3, 128 if tokenizer else 64, 64)
    results = {}
    with torch.no_grad(), _sdpa_backend(sdpa):
        for fast in (True, False):
            model.fast_attention = fast
            assert all(blk.attn.fast == fast for blk in model.blocks)
            if tokenizer:
                assert all(blk.attn.fast == fast for blk in model.tokenizer.blocks)
            results[fast] = model(x)
    for i, (a, b) in zip(kw["out_indices"], zip(results[True], results[False])):
        diff, scale = (a - b).abs().max().item(), a.abs().max().item()
        assert diff <= 1e-5 * scale, f"block {i}: fast vs eager {diff:.2e}, output scale {scale:.2e}"


@pytest.mark.parametrize("sdpa", ["default", "math"])
@pytest.mark.parametrize("tokenizer", [False, True], ids=["plain", "tokenizer"])
def test_fast_equals_eager_bf16_rope_per_block(tokenizer, sdpa):
    """bfloat16 RoPE: on the same block input, the two attention paths agree far better than the
    two RoPE precisions do.

    Every block's input is recorded in one forward pass of the bf16-RoPE model; each block's
    attention then runs on that exact input with the bf16 RoPE table (fast and eager) and with the
    float32 table (fast). RoPE is applied before the paths split, so fast and eager see identical
    bf16-rounded q and k and differ only by float32 summation order (measured at most 3.3e-7 of the
    output scale), while the RoPE precision moves q and k by up to half a bfloat16 ulp (3.9e-3
    relative) and the attention output by at least 5.8e-4 of its scale in every block. Largest
    ratio measured here: 3.5e-4 (default and "math" backends). A kernel would need ~30x more than
    float32 summation noise to reach the 1e-2 bound, while a path that skipped RoPE or rounded it
    differently would sit near ratio 1.
    """
    torch.manual_seed(0)
    kw = dict(out_type="raw", use_tokenizer=tokenizer, layer_scale_init_value=1.0)
    model = Sapiens2(TINY, **kw).eval()
    rope32 = Sapiens2(TINY, pos_embed_rope_dtype="fp32", **kw).rope_embed
    x = torch.randn(2, 3, 128 if tokenizer else 64, 64)
    inputs = []
    hooks = [blk.register_forward_pre_hook(lambda m, a, kw_: inputs.append(a[0]), with_kwargs=True)
             for blk in model.blocks]
    with torch.no_grad(), _sdpa_backend(sdpa):
        model(x)
        for h in hooks:
            h.remove()
        hw = model.valid_input_size(x.shape[2], x.shape[3])
        rope16, rope32 = model.rope_embed(*hw), rope32(*hw)
        assert rope16[0].dtype == torch.bfloat16 and rope32[0].dtype == torch.float32
        assert len(inputs) == len(model.blocks)
        for i, (blk, t) in enumerate(zip(model.blocks, inputs)):
            h = blk.ln1(t)
            out = {}
            for fast in (True, False):
                blk.attn.fast = fast
                out[fast] = blk.attn(h, rope=rope16)
            blk.attn.fast = True
            kernels = (out[True] - out[False]).abs().max().item()
            rope_gap = (out[True] - blk.attn(h, rope=rope32)).abs().max().item()
            assert rope_gap > 0, f"block {i}: bf16 and fp32 RoPE gave the same attention output"
            assert kernels < 1e-2 * rope_gap, f"block {i}: fast vs eager {kernels:.2e}, RoPE {rope_gap:.2e}"


def test_fast_equals_eager_v1():
    torch.manual_seed(0)
    model = Sapiens(TINY_V1, img_size=(64, 48), out_type="raw").eval()
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        fast = model(x)[0]
        model.fast_attention = False
        eager = model(x)[0]
    assert (fast - eager).abs().max().item() < 1e-5


def test_rope_precision_matters():
    torch.manual_seed(0)
    bf16 = Sapiens2(TINY, out_type="raw", layer_scale_init_value=1.0).eval()
    fp32 = Sapiens2(TINY, out_type="raw", pos_embed_rope_dtype="fp32").eval()
    state = {k: v for k, v in bf16.state_dict().items()}
    fp32.load_state_dict(state)
    assert bf16.rope_embed.periods.dtype == torch.bfloat16 and fp32.rope_embed.periods.dtype == torch.float32
    sin16, _ = bf16.rope_embed(4, 3)
    assert sin16.dtype == torch.bfloat16 and sin16.shape == (12, 8)
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        diff = (bf16(x)[0] - fp32(x)[0]).abs().max().item()
    assert 1e-6 < diff < 0.5
    with pytest.raises(ValueError, match="pos_embed_rope_dtype"):
        Sapiens2(TINY, pos_embed_rope_dtype="fp16")


def test_tokenizer_shapes_and_window_semantics():
    torch.manual_seed(0)
    model = Sapiens2(TINY, img_size=(256, 192), use_tokenizer=True, out_type="raw").eval()
    assert model.valid_input_size(256, 192) == (4, 3)
    x = torch.randn(2, 3, 256, 192)
    with torch.no_grad():
        (raw,) = model(x)
        model.out_type = "featmap"
        (feat,) = model(x)
        # Reference: run every 4x4 window on its own through the tokenizer blocks.
        tokens, (h, w) = model.patch_embed(x)
        tok = model.tokenizer
        grid = tokens.reshape(2, h, w, -1)
        expected = []
        for b in range(2):
            for i in range(0, h, 4):
                for j in range(0, w, 4):
                    win = grid[b, i : i + 4, j : j + 4].reshape(1, 16, -1)
                    t = torch.cat((tok.w_cls, win), dim=1) + tok.local_pos_embed
                    for blk in tok.blocks:
                        t = blk(t)
                    expected.append(t[0, 0])
        got, hw = tok(tokens, (h, w))
    assert raw.shape == (2, 9 + 12, 32) and feat.shape == (2, 32, 4, 3) and hw == (4, 3)
    assert (got.reshape(-1, 32) - torch.stack(expected)).abs().max().item() < 1e-5
    assert "q_norm" not in str(dict(tok.named_parameters()).keys()) and not hasattr(
        tok.blocks[0].attn, "q_norm"
    )
    assert tok.blocks[0].attn.gamma is None and tok.blocks[0].ffn.w3.in_features == 4 * 32


def test_bad_input_sizes_and_names():
    model = Sapiens2(TINY)
    with pytest.raises(ValueError, match=r"100x48.*multiples of 16.*heights: 96 or 112"):
        model(torch.zeros(1, 3, 100, 48))
    tok = Sapiens2(TINY, use_tokenizer=True)
    with pytest.raises(ValueError, match=r"multiples of 64.*heights: 64 or 128.*widths: 64"):
        tok.valid_input_size(96, 64)
    with pytest.raises(ValueError, match=r"1000x768.*heights: 960 or 1024"):
        Sapiens2(TINY, img_size=(1000, 768), use_tokenizer=True)
    with pytest.raises(ValueError, match="B x 3 x H x W"):
        model(torch.zeros(3, 64, 48))
    with pytest.raises(ValueError, match=r"known archs: .*sapiens2_0\.1b.*sapiens2_5b"):
        Sapiens2("sapiens2_2b")
    with pytest.raises(ValueError, match=r"known archs: .*sapiens_0\.3b"):
        Sapiens("sapiens_5b")
    with pytest.raises(ValueError, match="num_tokenizer_layers"):
        Sapiens2({k: v for k, v in TINY.items() if k != "num_tokenizer_layers"}, use_tokenizer=True)
    with pytest.raises(ValueError, match="out_type"):
        Sapiens2(TINY, out_type="avg")
    with pytest.raises(ValueError, match="out index 18"):
        Sapiens2(TINY, out_indices=[18])
    with pytest.raises(ValueError, match="with_cls_token"):
        Sapiens2(TINY, with_cls_token=False, out_type="cls_token")
    with pytest.raises(ValueError, match="multiples of 16"):
        Sapiens(TINY_V1, img_size=(64, 48)).valid_input_size(64, 50)


def test_frozen_stages():
    model = Sapiens2(TINY, frozen_stages=3, use_tokenizer=True)
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert all(
        n.startswith(
            ("patch_embed", "cls_token", "storage_tokens", "tokenizer", "blocks.0.", "blocks.1.", "blocks.2.")
        )
        for n in frozen
    )
    assert any(n.startswith("tokenizer.blocks.1") for n in frozen) and "cls_token" in frozen
    assert all(n.startswith(("blocks.", "ln1")) for n in trainable) and "blocks.3.ln1.weight" in trainable
    model.train()
    assert not model.blocks[2].training and model.blocks[3].training and not model.patch_embed.training
    full = Sapiens2(TINY, frozen_stages=18)
    assert not any(p.requires_grad for p in full.parameters())
    v1 = Sapiens(TINY_V1, img_size=(32, 32), frozen_stages=1)
    assert not v1.pos_embed.requires_grad and not v1.layers[0].attn.qkv.weight.requires_grad
    assert v1.layers[1].attn.qkv.weight.requires_grad and v1.ln1.weight.requires_grad


@pytest.mark.parametrize("cls,settings", [(Sapiens2, TINY), (Sapiens, TINY_V1)])
def test_forward_intermediates_and_out_types(cls, settings):
    torch.manual_seed(0)
    model = cls(settings, img_size=(64, 48), out_indices=[1, -1], out_type="featmap").eval()
    last = settings["num_layers"] - 1
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        feats = model(x)
        model.out_type = "cls_token"
        cls_tokens = model(x)
        model.out_type = "raw"
        raws = model(x)
        inter_f, inter_c = model.forward_intermediates(x, [1, last])
        last2_f, _ = model.forward_intermediates(x, 2)
    assert model.out_indices == [1, last]
    assert feats[0].shape == (2, 32, 4, 3) and cls_tokens[1].shape == (2, 32)
    prefix = model.num_extra_tokens
    assert raws[0].shape == (2, prefix + 12, 32)
    for a, b in zip(inter_f, feats):
        assert torch.equal(a, b)
    for a, b in zip(inter_c, cls_tokens):
        assert torch.equal(a, b)
    assert torch.equal(last2_f[1], feats[1]) and len(last2_f) == 2
    assert model.embed_dims == 32 and model.num_layers == settings["num_layers"] and model.patch_size == 16


def test_no_cls_token_and_registry_build():
    model = MODELS.build(
        dict(type="Sapiens2", arch=TINY, with_cls_token=False, out_type="raw", n_storage_tokens=2)
    )
    assert isinstance(model, Sapiens2) and model.num_extra_tokens == 2
    with torch.no_grad():
        (raw,) = model(torch.randn(1, 3, 32, 32))
        feats, cls_tokens = model.forward_intermediates(torch.randn(1, 3, 32, 32), [0])
    assert raw.shape == (1, 2 + 4, 32) and feats[0].shape == (1, 32, 2, 2) and cls_tokens == []
    v1 = MODELS.build(dict(type="Sapiens", arch=TINY_V1, img_size=(32, 32)))
    assert isinstance(v1, Sapiens)


@pytest.mark.parametrize("family", ["Sapiens2", "Sapiens"])
def test_fast_attention_switches_every_attention(family):
    """One ``fast_attention`` switch (the shared backbone base) reaches every attention module, the
    Sapiens2 tokenizer's included, and reads back what was set."""
    extra = {"use_tokenizer": True} if family == "Sapiens2" else {}
    model = CLASSES[family](arch=TINY if family == "Sapiens2" else TINY_V1, img_size=(64, 48), patch_size=4,
                            **extra)
    attentions = [m for m in model.modules() if m is not model and hasattr(m, "fast")]
    assert attentions and (family == "Sapiens" or any("tokenizer" in n for n, m in model.named_modules()
                                                      if hasattr(m, "fast")))
    for value in (False, True, False):
        model.fast_attention = value
        assert model.fast_attention is value
        assert all(m.fast is value for m in attentions)
