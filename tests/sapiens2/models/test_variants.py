"""The one table of named model variants (``sapiens2.models.variants``) and everything derived from it.

The arch tables, ``OFFICIAL_BACKBONES``, the probe's presets and tiny archs, ``--list-backbones``
and the model card must name exactly the table's variants, and every variant must build.
"""

from __future__ import annotations

import pytest
import torch

from sapiens2.errors import UnknownNameError
from sapiens2.models.variants import FAMILIES, get_variant, variants


def test_arch_tables_and_official_backbones_are_the_tables():
    from sapiens2.models.backbones.common import OFFICIAL_BACKBONES, arch_settings, list_archs

    official = variants(official=True)
    assert OFFICIAL_BACKBONES == {v.name: v.backbone_config() for v in official}
    assert list_archs() == sorted(v.name for v in official if v.arch == v.name)
    for v in official:
        assert arch_settings(v.arch) == dict(v.settings), v.name
    assert [v.name for v in variants(official=False)] == ["sapiens2_tiny", "sapiens_tiny"]
    with pytest.raises(UnknownNameError, match="sapiens2_0.1b"):
        get_variant("sapiens2_7b")


def test_probe_presets_are_the_probe_variants():
    from benchmarks.probe.backbones.presets import SHIPPED_NAMES, list_presets, resolve_backbone_cfg
    from benchmarks.probe.backbones.sapiens import TINY_ARCHS

    types = {"sapiens2": "Sapiens2Probe", "sapiens": "SapiensV1Probe"}
    probed = variants(probe=True)
    assert {v.name for v in variants(probe=False)} == {"sapiens2_1b_4k"}
    # the backbones pretrained here (shipped weights, their own arch config) aside
    sapiens_presets = [n for n in list_presets()
                       if resolve_backbone_cfg(n)["type"] in types.values() and n not in SHIPPED_NAMES]
    assert sorted(sapiens_presets) == sorted(v.name for v in probed)
    for v in probed:
        assert resolve_backbone_cfg(v.name) == {"type": types[v.family], "arch": v.name}
    assert TINY_ARCHS == {v.name: dict(v.settings) for v in variants(official=False)}


def test_list_backbones_lists_every_probe_variant(monkeypatch):
    import benchmarks.probe.backbones.presets as presets
    from benchmarks.cli.probe import list_backbones

    monkeypatch.setattr(presets, "_meta_params", lambda cls, cfg, img_size: 1)  # names only: build nothing
    names = {line.split()[0] for line in list_backbones().splitlines()[1:]}
    assert {v.name for v in variants(probe=True)} <= names
    assert not {v.name for v in variants(probe=False)} & names


def test_model_card_covers_the_official_sapiens2_variants(monkeypatch):
    import sapiens2.models.flops as flops
    from benchmarks.reproduce.model_card import compute_rows

    def fake(arch, img_size=None):  # the card's arithmetic is tested elsewhere; here: which rows
        return {"params": 1, "img_size": list(get_variant(arch).constructor["img_size"]), "flops": 1,
                "flops_total_2x_macs": 1, "macs_linear": 0, "macs_conv": 0, "macs_attention": 0}

    monkeypatch.setattr(flops, "backbone_complexity", fake)
    rows = compute_rows()
    official = variants("sapiens2", official=True)
    assert [r["arch"] for r in rows] == [v.name for v in official]
    for r, v in zip(rows, official):
        assert (r["params_paper_b"], r["flops_paper_t"], r["params_official"]) == (
            v.params_b_card, v.tflops_card, v.num_params)


@pytest.mark.parametrize("name", [v.name for v in variants(official=True)])
def test_every_official_variant_builds_with_its_parameter_count(name):
    from sapiens2.models.builder import build_model

    v = get_variant(name)
    model = build_model(name, device="meta")
    assert type(model).__name__ == FAMILIES[v.family]
    assert tuple(model.img_size) == v.constructor["img_size"]
    assert sum(p.numel() for p in model.parameters()) == v.num_params


@pytest.mark.parametrize("name", [v.name for v in variants(official=False)])
def test_every_test_sized_variant_builds_and_runs(name):
    from benchmarks.probe.backbones.presets import build_probe_backbone

    bb = build_probe_backbone(name, img_size=(32, 32))
    feats, _ = bb.extract(torch.rand(1, 3, 32, 32), [0])
    assert bb.embed_dims == get_variant(name).settings["embed_dims"] == feats[0].shape[1]
