"""Task models: official configs on the meta device, golden parity, predict() and post-processing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from sapiens2.models import postprocess as pp
from sapiens2.models.builder import build_model, substitute_arch
from sapiens2.models.checkpoint import load_checkpoint
from sapiens2.models.estimators import PoseTopdownEstimator
from sapiens2.models.parity import split_case_file
from sapiens2.reference import keypoints308, official_task_configs

OFFICIAL = sorted(official_task_configs())


@pytest.fixture(scope="module")
def official_models(shared_dir):
    with open(shared_dir / "reference" / "official_task_models.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def golden_manifest(golden_models):
    with open(golden_models / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("name", OFFICIAL)
def test_official_config_keys_shapes_and_counts(name, official_models):
    ref = official_models[name]
    assert official_task_configs()[name]["model"] == ref["model"]
    model = build_model(name, device="meta")
    shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
    assert sorted(shapes) == sorted(ref["state_dict"])
    assert shapes == ref["state_dict"]
    assert sum(p.numel() for p in model.parameters()) == ref["num_params"]
    assert sum(p.numel() for p in model.decode_head.parameters()) == ref["head_params"]
    assert sum(p.numel() for p in model.backbone.parameters()) == ref["backbone_params"]


@pytest.mark.parametrize("task", ["pointmap", "keypoints308"])
def test_official_model_runs_on_meta_at_1024x768(task):
    name = next(n for n in OFFICIAL if n.startswith("sapiens2_0.4b_" + task))
    model = build_model(name, device="meta").eval()
    out = model(torch.empty(1, 3, 1024, 768, device="meta"))
    if task == "pointmap":
        assert out[0].shape == (1, 3, 1024, 768) and out[1].shape == (1, 1)
    else:
        assert out.shape == (1, 308, 256, 192)


def _task_cases(manifest):
    return [c for c in manifest["cases"] if "backbone" in c["official_config"]]


def test_golden_task_cases_within_tolerance(golden_models, golden_manifest):
    cases = _task_cases(golden_manifest)
    assert {c["official_config"]["type"] for c in cases} >= {
        "PoseTopdownEstimator", "SegEstimator", "NormalEstimator", "PointmapEstimator", "AlbedoEstimator"}
    failures = []
    for case in cases:
        cfg = substitute_arch(case["official_config"], golden_manifest.get("arch_settings"))
        state, x, expected = split_case_file(golden_models / case["file"])
        model = build_model(cfg)
        load_checkpoint(model, state, strict=True)
        model.eval()
        with torch.inference_mode():
            outs = model(x.float())
        outs = outs if isinstance(outs, tuple) else (outs,)
        errs = {}
        for key, ref in expected.items():
            got = outs[int(key[len("out"):])]
            assert got.shape == ref.shape, (case["name"], key)
            errs[key] = float((got - ref).abs().max())
        worst = max(errs.values())
        print(f"{case['name']}: max abs err {worst:.3g} (tolerance {case['tolerance']['abs']}) {errs}")
        if not worst <= case["tolerance"]["abs"]:
            failures.append((case["name"], errs))
    assert not failures


def _tiny(golden_manifest, type_name):
    case = next(c for c in _task_cases(golden_manifest) if c["official_config"]["type"] == type_name)
    torch.manual_seed(0)
    model = build_model(substitute_arch(case["official_config"], golden_manifest["arch_settings"])).eval()
    h, w = case["official_config"]["backbone"]["img_size"]
    return model, torch.randn(2, 3, h, w)


def test_predict_dense_tasks(golden_manifest):
    seg, x = _tiny(golden_manifest, "SegEstimator")
    out = seg.predict(x, size=(40, 30))
    assert out["labels"].shape == (2, 40, 30) and out["labels"].dtype == torch.int64
    assert 0 <= int(out["labels"].min()) and int(out["labels"].max()) < 29

    normal, x = _tiny(golden_manifest, "NormalEstimator")
    n = normal.predict(x)["normals"]
    torch.testing.assert_close(n.norm(dim=1), torch.ones(2, *x.shape[-2:]))

    albedo, x = _tiny(golden_manifest, "AlbedoEstimator")
    a = albedo.predict(x)["albedo"]
    assert a.shape == (2, 3, *x.shape[-2:]) and float(a.min()) >= 0 and float(a.max()) <= 1

    pointmap, x = _tiny(golden_manifest, "PointmapEstimator")
    assert pointmap.canonical_focal_length == 768.0
    K = torch.tensor([[384.0, 0, 96], [0, 384.0, 128], [0, 0, 1]])
    out = pointmap.predict(x, K=K)
    raw, scale = pointmap(x)
    torch.testing.assert_close(out["pointmap_canonical"], raw * scale.view(2, 1, 1, 1))
    torch.testing.assert_close(out["points"], out["pointmap_canonical"] * 0.5)


def test_pointmap_metric_points_invert_the_official_canonicalisation():
    # Official targets: camera-frame points P times 768 / fx. A model that predicts them exactly as
    # (P~, s) with s * P~ = P * 768 / fx must give back P.
    torch.manual_seed(1)
    P = torch.rand(2, 3, 6, 5) + torch.tensor([0.0, 0.0, 2.0]).view(1, 3, 1, 1)
    K = torch.tensor([[[500.0, 0, 2], [0, 510, 3], [0, 0, 1]], [[1200.0, 0, 2], [0, 1200, 3], [0, 0, 1]]])
    canonical = P * (768.0 / K[:, 0, 0]).view(2, 1, 1, 1)
    s = torch.tensor([[2.5], [0.8]])
    points = pp.pointmap_to_metric(canonical / s.view(2, 1, 1, 1), s, K)
    torch.testing.assert_close(points, P)
    with pytest.raises(ValueError, match="intrinsics"):
        pp.pointmap_to_metric(canonical, s, torch.eye(2))


def test_seg_labels_resize_logits_before_argmax():
    logits = torch.zeros(1, 2, 2, 2)
    logits[0, 0, :, 0] = 1.0  # class 0 on the left column, class 1 on the right one
    logits[0, 1, :, 1] = 1.0
    labels = pp.seg_logits_to_labels(logits, size=(4, 8))
    assert labels.shape == (1, 4, 8)
    assert labels[0, :, :4].eq(0).all() and labels[0, :, 4:].eq(1).all()


def test_unit_normals_and_albedo_clamp():
    n = pp.unit_normals(torch.tensor([3.0, 0.0, 4.0]).view(1, 3, 1, 1).expand(1, 3, 2, 2))
    torch.testing.assert_close(n[0, :, 0, 0], torch.tensor([0.6, 0.0, 0.8]))
    a = pp.clamp_albedo(torch.tensor([-0.5, 0.3, 1.7]).view(1, 3, 1, 1))
    assert a.flatten().tolist() == pytest.approx([0.0, 0.3, 1.0])
    with pytest.raises(ValueError, match="B x 3 x H x W"):
        pp.unit_normals(torch.zeros(1, 4, 2, 2))


def _udp_affine(center, scale, out_wh):
    # image -> crop affine of the UDP top-down crop (no rotation).
    sx = (out_wh[0] - 1.0) / scale[0]
    sy = (out_wh[1] - 1.0) / scale[1]
    return np.array([[sx, 0, -center[0] * sx + 0.5 * (out_wh[0] - 1)],
                     [0, sy, -center[1] * sy + 0.5 * (out_wh[1] - 1)]])


def test_crop_to_image_inverts_the_affine_and_supports_center_scale():
    mat = _udp_affine((300.0, 200.0), (192.0, 256.0), (96, 128))
    img_pts = np.array([[[250.0, 120.0], [330.0, 310.0]]])
    crop_pts = img_pts @ mat[:, :2].T + mat[:, 2]
    back = pp.crop_to_image(torch.as_tensor(crop_pts), mat)
    np.testing.assert_allclose(back.numpy(), img_pts, atol=1e-9)
    np.testing.assert_allclose(pp.crop_to_image(torch.as_tensor(crop_pts), {"affine": mat}).numpy(), img_pts)
    cs = pp.crop_to_image(torch.tensor([[[48.0, 64.0]]]),
                          {"center": [[300.0, 200.0]], "scale": [[192.0, 256.0]], "input_size": (96, 128)})
    np.testing.assert_allclose(cs.numpy(), [[[300.0, 200.0]]])
    with pytest.raises(ValueError, match="crop affine"):
        pp.crop_to_image(torch.zeros(2, 3, 2), np.zeros((3, 2, 3)))


class _MirrorHead(nn.Module):
    """Returns fixed heatmaps for the reference input and their mirror image for the mirrored input,
    as a perfectly flip-equivariant pose model would."""

    def __init__(self, x0, heatmaps, flip_pairs):
        super().__init__()
        from sapiens2.codecs.udp import flip_heatmaps

        self.x0, self.heatmaps, self.mirrored = x0, heatmaps, flip_heatmaps(heatmaps, flip_pairs)

    def forward(self, feats):
        x = feats[-1]
        if torch.equal(x, self.x0):
            return self.heatmaps.clone()
        assert torch.equal(x, self.x0.flip(-1)), "the estimator must mirror the input for the flip test"
        return self.mirrored.clone()


def test_pose_predict_flip_test_decodes_and_maps_back_to_image():
    from sapiens2.codecs import udp
    vocab = keypoints308()
    rng = np.random.default_rng(0)
    in_wh, hm_wh = (96, 128), (24, 32)
    crop_kpts = rng.uniform([10, 10], [86, 118], size=(308, 2))
    hms, _ = udp.udp_encode(crop_kpts, None, input_size=in_wh, heatmap_size=hm_wh, sigma=2.0)
    x0 = torch.randn(1, 3, in_wh[1], in_wh[0])
    head = _MirrorHead(x0, torch.as_tensor(hms)[None], vocab["flip_pairs"])
    model = PoseTopdownEstimator(nn.Identity(), head)
    mat = _udp_affine((300.0, 200.0), (192.0, 256.0), in_wh)
    out = model.predict(x0, flip_test=True, crop=mat)
    img_kpts = pp.crop_to_image(torch.as_tensor(crop_kpts[None]), mat).numpy()
    # UDP decodes to within a pixel of the crop (scaled x2 into the image here).
    assert np.abs(out["keypoints"].numpy() - img_kpts).max() < 3.0
    assert out["scores"].shape == (1, 308) and float(out["scores"].min()) > 0.9
    # Fusing without swapping left/right channels puts asymmetric keypoints in the wrong place.
    wrong = model.predict(x0, flip_test=True, flip_pairs=[], crop=mat)
    assert np.abs(wrong["keypoints"].numpy() - img_kpts).max() > 10.0


def test_pose_predict_on_tiny_model(golden_manifest):
    pose, x = _tiny(golden_manifest, "PoseTopdownEstimator")
    out = pose.predict(x)
    assert out["keypoints"].shape == (2, 308, 2) and out["scores"].shape == (2, 308)
    assert out["heatmaps"].shape == (2, 308, x.shape[-2] // 4, x.shape[-1] // 4)
    assert torch.isfinite(out["keypoints"]).all()


def test_build_model_accepts_names_entries_and_arch_dicts(golden_manifest):
    name = OFFICIAL[0]
    entry = official_task_configs()[name]
    assert type(build_model(entry, device="meta")).__name__ == entry["model"]["type"]
    from sapiens2.reference import official_archs

    archs = official_archs()
    for name, group, type_name in [("sapiens2_1b_4k", "archs", "Sapiens2"),
                                   ("sapiens_0.3b", "sapiens_v1_archs", "Sapiens")]:
        backbone = build_model(name, device="meta")
        assert type(backbone).__name__ == type_name
        assert sum(p.numel() for p in backbone.parameters()) == archs[group][name]["num_params"]
    with pytest.raises(KeyError, match="known"):
        build_model("sapiens2_9b_nothing")
    with pytest.raises(KeyError, match="known types"):
        build_model({"type": "NoSuchEstimator"})
