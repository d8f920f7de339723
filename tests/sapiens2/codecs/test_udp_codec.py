"""UDP heatmap codec: golden decode case, agreement with mmpose's UDPHeatmap, batching, flips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sapiens2.codecs import flip_heatmaps, flip_permutation, udp_decode, udp_encode
from sapiens2.utils_io import read_json

INPUT, HEATMAP = (96, 128), (24, 32)


def _mmpose_udp(sigma=2.0, blur=11):
    from mmpose.codecs import UDPHeatmap  # tests that call this are marked openmmlab

    return UDPHeatmap(input_size=INPUT, heatmap_size=HEATMAP, sigma=sigma, blur_kernel_size=blur)


def _random_keypoints(rng, k=40):
    kpts = np.stack([rng.uniform(-10, INPUT[0] + 10, k), rng.uniform(-10, INPUT[1] + 10, k)], 1)
    vis = rng.choice([0.0, 1.0, 2.0], size=k, p=[0.2, 0.6, 0.2])
    return kpts.astype(np.float32), vis.astype(np.float32)


def test_golden_udp_decode(golden_metrics):
    from evaluators.pose.parity import run_codec_case

    manifest = read_json(golden_metrics / "manifest.json")
    cases = [c for c in manifest["cases"] if c.get("kind") == "codec"]
    assert cases, f"no codec case in the golden manifest {golden_metrics / 'manifest.json'}"
    for case in cases:
        res = run_codec_case(case, golden_metrics, manifest)
        print(case["name"], res.errors)
        assert res.passed, res.message
        assert res.errors["keypoints"] <= 1e-3 and res.errors["scores"] <= 1e-5


@pytest.mark.openmmlab
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_encode_matches_mmpose(seed):
    codec = _mmpose_udp()
    rng = np.random.default_rng(seed)
    kpts, vis = _random_keypoints(rng)
    ref = codec.encode(kpts[None], vis[None])
    hm, w = udp_encode(kpts, vis, INPUT, HEATMAP, sigma=2.0)
    assert hm.shape == ref["heatmaps"].shape and hm.dtype == np.float32
    np.testing.assert_allclose(hm, ref["heatmaps"], atol=1e-6)
    np.testing.assert_array_equal(w, ref["keypoint_weights"][0])
    assert (w == 0).any() and (w > 0).any()  # the data covers dropped and kept keypoints


@pytest.mark.openmmlab
@pytest.mark.parametrize("seed", [0, 1])
def test_decode_matches_mmpose(seed):
    codec = _mmpose_udp()
    rng = np.random.default_rng(seed)
    kpts = np.stack([rng.uniform(2, INPUT[0] - 2, 30), rng.uniform(2, INPUT[1] - 2, 30)], 1).astype(
        np.float32
    )
    hm, _ = udp_encode(kpts, None, INPUT, HEATMAP, sigma=2.0)
    hm = (hm + rng.uniform(0, 0.05, hm.shape)).astype(np.float32)  # noisy, non-Gaussian maps
    ref_k, ref_s = codec.decode(hm.copy())
    ours_k, ours_s = udp_decode(hm[None], INPUT, HEATMAP, blur_kernel_size=11)
    err = np.abs(ours_k - ref_k).max()
    print("max keypoint error vs mmpose (px):", err)
    assert err < 1e-3
    np.testing.assert_allclose(ours_s, ref_s, atol=1e-6)


def test_round_trip_recovers_keypoints():
    rng = np.random.default_rng(3)
    kpts = np.stack([rng.uniform(30, INPUT[0] - 30, 20), rng.uniform(30, INPUT[1] - 30, 20)], 1).astype(
        np.float32
    )
    hm, _ = udp_encode(kpts, None, INPUT, HEATMAP, sigma=2.0)
    dec, scores = udp_decode(hm, INPUT, HEATMAP)
    # the official decode scales by input/(heatmap-1), the encode by (input-1)/(heatmap-1)
    expected = kpts * (np.array(INPUT) / (np.array(INPUT) - 1))
    err = np.abs(dec[0] - expected).max()
    print("round-trip error (px):", err)
    assert err < 0.1  # sub-pixel, far below the 4 px stride
    assert (scores > 0.8).all()


def test_decode_batched_torch_and_numpy_agree():
    rng = np.random.default_rng(4)
    hms = rng.uniform(0, 1, (3, 5, HEATMAP[1], HEATMAP[0])).astype(np.float32)
    k_np, s_np = udp_decode(hms, INPUT, HEATMAP)
    k_t, s_t = udp_decode(torch.from_numpy(hms), INPUT, HEATMAP)
    assert isinstance(k_t, torch.Tensor) and k_t.shape == (3, 5, 2) and s_t.shape == (3, 5)
    np.testing.assert_allclose(k_t.numpy(), k_np, atol=1e-6)
    for b in range(3):
        k_b, s_b = udp_decode(hms[b], INPUT, HEATMAP)
        np.testing.assert_allclose(k_b[0], k_np[b], atol=1e-6)
        np.testing.assert_allclose(s_b[0], s_np[b])


def test_decode_rejects_bad_input():
    with pytest.raises(ValueError, match="does not match"):
        udp_decode(np.zeros((1, 2, 10, 8), np.float32), INPUT, HEATMAP)
    bad = np.zeros((1, 2, HEATMAP[1], HEATMAP[0]), np.float32)
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        udp_decode(bad, INPUT, HEATMAP)
    with pytest.raises(ValueError, match="K x 2"):
        udp_encode(np.zeros((3, 3)), None, INPUT, HEATMAP, 2.0)


def test_flip_heatmaps_mirrors_and_swaps():
    rng = np.random.default_rng(5)
    hm = rng.uniform(0, 1, (2, 4, 6, 5)).astype(np.float32)
    pairs = [[1, 2], [2, 1]]  # listed in both orders, as keypoints308.json does
    assert flip_permutation(pairs, 4) == [0, 2, 1, 3]
    out = flip_heatmaps(hm, pairs)
    np.testing.assert_array_equal(out[:, 0], hm[:, 0, :, ::-1])
    np.testing.assert_array_equal(out[:, 1], hm[:, 2, :, ::-1])
    np.testing.assert_array_equal(flip_heatmaps(out, pairs), hm)  # an involution
    out_t = flip_heatmaps(torch.from_numpy(hm), pairs)
    np.testing.assert_array_equal(out_t.numpy(), out)
    with pytest.raises(ValueError, match="outside"):
        flip_permutation([[0, 9]], 4)


@pytest.mark.parametrize("shape, kernel_size", [((6, 64, 48), 11), ((3, 5, 9), 17), ((2, 1, 1), 11)])
def test_banded_blur_equals_the_zero_padded_conv2d(shape, kernel_size):
    """The decoder's blur (banded matrix products) sums exactly what a zero-padded separable conv2d does."""
    import torch.nn.functional as F

    from sapiens2.codecs.udp import _blur_keep_peak, gaussian_kernel1d

    hm = torch.rand(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    k, pad = gaussian_kernel1d(kernel_size, torch.float64), kernel_size // 2
    x = F.conv2d(hm[:, None], k.view(1, 1, 1, -1), padding=(0, pad))
    x = F.conv2d(x, k.view(1, 1, -1, 1), padding=(pad, 0))[:, 0]
    x = x * (hm.flatten(1).amax(1) / x.flatten(1).amax(1)).view(-1, 1, 1)
    torch.testing.assert_close(_blur_keep_peak(hm, kernel_size), x, rtol=0, atol=1e-14)
