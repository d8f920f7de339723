"""The backbone shipped in ``sapiens2/weights/``: its files and card agree, it loads strictly, it is
packaged, and the probe finds it (with its weights) and its random-init twin by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from sapiens2.pretrain.recipes import config_hash, get_recipe
from sapiens2.utils_io import file_sha256
from sapiens2.weights import SHIPPED, WEIGHTS_DIR, backbone_config, model_card, weights_path

ROOT = Path(__file__).resolve().parents[3]
NAMES = sorted(SHIPPED)


@pytest.mark.parametrize("name", NAMES)
def test_weights_match_their_card_and_the_recipe(name):
    path = weights_path(name)
    card = model_card(name)
    assert path.stat().st_size <= 20 * 10**6 and card["bytes"] == path.stat().st_size
    assert file_sha256(path) == card["sha256"]
    recipe = get_recipe(SHIPPED[name])
    assert card["recipe"] == SHIPPED[name] and card["config_hash"] == config_hash(recipe)
    assert card["config"] == recipe  # the card's config is today's recipe
    assert card["backbone_config"] == backbone_config(name) == recipe["model"]["backbone"]
    assert card["steps"] == recipe["steps"] and card["images_seen"] == recipe["steps"] * recipe["batch_size"]
    assert card["data"] == recipe["data"] and card["timing"]["wall_s"] > 0 and card["timing"]["cpu_s"] > 0
    md = (WEIGHTS_DIR / f"{name}.md").read_text()
    assert card["sha256"] in md and card["config_hash"] in md


@pytest.mark.parametrize("name", NAMES)
def test_weights_load_strictly_with_build_model(name):
    from sapiens2.models.builder import build_model
    from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file

    state = load_state_dict_file(weights_path(name))
    model = build_model(backbone_config(name))
    report = load_checkpoint(model, weights_path(name))
    assert report.loaded == len(state) and not report.missing
    assert all(torch.isfinite(v).all() for v in state.values())


def test_package_data_ships_the_weights():
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.safetensors" in data["sapiens2.weights"]
    assert WEIGHTS_DIR == ROOT / "sapiens2" / "weights"


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("name", NAMES)
def test_probe_finds_the_shipped_backbone_and_its_random_twin(name):
    from benchmarks.probe.backbones.presets import backbone_table, build_probe_backbone, list_presets
    from sapiens2.models.checkpoint import load_state_dict_file

    assert {name, f"{name}-random"} <= set(list_presets())
    state = load_state_dict_file(weights_path(name))
    shipped = build_probe_backbone(name, img_size=(256, 192))
    twin = build_probe_backbone(f"{name}-random", img_size=(256, 192))
    assert shipped.weights == str(weights_path(name)) and twin.weights.startswith("random")
    assert all(torch.equal(shipped.model.state_dict()[k], v) for k, v in state.items())
    assert any(not torch.equal(twin.model.state_dict()[k], v) for k, v in state.items())
    feats, cls = shipped.forward_layers(torch.rand(1, 3, 256, 192), [-1])
    assert feats[0].shape == (1, 192, 16, 12) and cls[0].shape == (1, 192)
    rows = {r["name"]: r for r in backbone_table()}
    assert rows[name]["weights"].startswith("shipped")
    assert rows[name]["params"] == model_card(name)["params"] == sum(p.numel() for p in shipped.parameters())
    assert rows[f"{name}-random"]["weights"].startswith("random init")


@pytest.mark.usefixtures("one_torch_thread")
def test_shipped_backbones_of_one_arch_share_one_random_twin():
    """The main job pairs every shipped backbone of an arch with one twin: same arch, same init seed,
    the same weights."""
    from benchmarks.probe.backbones.presets import build_probe_backbone

    by_arch: dict[str, list[str]] = {}
    for name in NAMES:
        by_arch.setdefault(repr(backbone_config(name)), []).append(name)
    shared = [names for names in by_arch.values() if len(names) > 1]
    assert shared, "expected two shipped backbones of one arch (sapiens2_cpu_small and its MAE-only variant)"
    for names in shared:
        twins = [build_probe_backbone(f"{n}-random", img_size=(256, 192)).state_dict() for n in names]
        for other in twins[1:]:
            assert other.keys() == twins[0].keys()
            assert all(torch.equal(other[k], twins[0][k]) for k in other)


@pytest.mark.parametrize("name", NAMES)
def test_weights_metadata_agrees_with_the_card(name):
    """The export's own metadata (written by the pretrainer) says what the card says: a MAE-only run
    has no teacher, so its export is the student."""
    import json

    from safetensors import safe_open

    with safe_open(str(weights_path(name)), "pt") as f:
        meta = json.loads(f.metadata()["sapiens2_pretrain"])
    card = model_card(name)
    assert meta["exported"] == card["exported"]
    assert meta["config_hash"] == card["config_hash"] and meta["step"] == card["steps"]
    assert meta["backbone_config"] == card["backbone_config"] and meta["recipe"] == card["recipe"]
    weights = card["config"]["model"]["loss_weights"]
    assert card["exported"] == ("teacher" if weights["cl"] > 0 else "student")
