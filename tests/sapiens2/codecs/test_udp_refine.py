"""UDP decoding's refinement rules: ``"bounded"`` is the official step where that step is bounded, and
the argmax on heatmaps whose blurred log-map is a saddle or (nearly) flat at the argmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sapiens2.codecs.udp import REFINE_RULES, _blur_keep_peak, udp_decode, udp_encode

INPUT, HEATMAP = (96, 128), (24, 32)
SCALE = np.array(INPUT, np.float64) / (np.array(HEATMAP, np.float64) - 1)
REACH = (11 + 1) / 2  # the bounded rule's step limit for the default blur kernel of 11


def _gaussian(cx: float, cy: float, sigma: float) -> np.ndarray:
    xs, ys = np.arange(HEATMAP[0])[None], np.arange(HEATMAP[1])[:, None]
    return np.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma**2))


def _argmax_keypoint(hm: np.ndarray) -> np.ndarray:
    """The argmax of one H x W map in input pixels, computed as the decoder scales it."""
    y, x = np.unravel_index(int(hm.argmax()), hm.shape)
    return (np.array([x, y], np.float64) * SCALE).astype(np.float32)


def _log_hessian(hm: np.ndarray) -> tuple[float, float, float]:
    """(d2/dx2, d2/dy2, d2/dxdy) of the decoder's blurred, clamped log-map at the raw argmax."""
    blurred = _blur_keep_peak(torch.from_numpy(hm[None]).double(), 11)[0].numpy()
    logmap = np.pad(np.log(np.clip(blurred, 1e-3, 50.0)), 1, mode="edge")
    y, x = np.unravel_index(int(hm.argmax()), hm.shape)
    m = logmap[y : y + 3, x : x + 3]  # the 3 x 3 stencil, centre at [1, 1]
    dxx = m[1, 2] - 2 * m[1, 1] + m[1, 0]
    dyy = m[2, 1] - 2 * m[1, 1] + m[0, 1]
    dxy = 0.25 * (m[2, 2] - m[2, 0] - m[0, 2] + m[0, 0])
    return float(dxx), float(dyy), float(dxy)


def _decode_one(hm: np.ndarray, refine: str) -> np.ndarray:
    kpts, _ = udp_decode(hm.astype(np.float32)[None, None], INPUT, HEATMAP, refine=refine)
    return kpts[0, 0]


def _noisy_gaussian_maps(amplitude: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    kpts = np.stack([rng.uniform(8, INPUT[0] - 8, 200), rng.uniform(8, INPUT[1] - 8, 200)], 1)
    hm, _ = udp_encode(kpts.astype(np.float32), None, INPUT, HEATMAP, sigma=2.0)
    return (hm + rng.normal(0, amplitude, hm.shape)).astype(np.float32)


@pytest.mark.parametrize("amplitude", [0.0, 0.05, 0.1])
def test_bounded_is_the_official_decode_bit_for_bit_on_well_formed_peaks(amplitude):
    hm = _noisy_gaussian_maps(amplitude, seed=int(amplitude * 100))
    official, scores_o = udp_decode(hm[None], INPUT, HEATMAP, refine="official")
    bounded, scores_b = udp_decode(hm[None], INPUT, HEATMAP, refine="bounded")
    np.testing.assert_array_equal(bounded, official)
    np.testing.assert_array_equal(scores_b, scores_o)
    if amplitude > 0:  # the noise moves argmaxes off the peak: steps longer than one pixel are kept
        argmax = np.stack([_argmax_keypoint(m) for m in hm])
        step = np.abs((official[0] - argmax) / SCALE.astype(np.float32)).max(1)
        print("longest step kept (heatmap px):", step.max())
        assert amplitude < 0.1 or step.max() > 1.0


def test_default_refinement_is_the_official_one():
    hm = _noisy_gaussian_maps(0.3, seed=7)  # noisy enough for some degenerate maps
    default, _ = udp_decode(hm[None], INPUT, HEATMAP)
    official, _ = udp_decode(hm[None], INPUT, HEATMAP, refine="official")
    bounded, _ = udp_decode(hm[None], INPUT, HEATMAP, refine="bounded")
    np.testing.assert_array_equal(default, official)
    assert (default != bounded).any()  # the data holds maps where the rules differ


def test_bounded_returns_the_argmax_at_a_saddle():
    """Two peaks 10 px apart and a one-pixel spike between them (the raw argmax): blurred, the spike is
    small beside the peaks, so the log-map at the argmax curves up along x and down along y. The
    official step (to the saddle point, within the blur's reach) leaves the argmax's cell."""
    hm = _gaussian(7.0, 16.0, 2.0) + 0.9 * _gaussian(17.0, 16.0, 2.0)
    hm[16, 11] = 1.5
    dxx, dyy, _ = _log_hessian(hm)
    assert dxx > 0 > dyy  # a valley along x, a ridge along y
    official, bounded = _decode_one(hm, "official"), _decode_one(hm, "bounded")
    step = np.abs((official - _argmax_keypoint(hm)) / SCALE).max()
    print("official step at the saddle (heatmap px):", step)
    assert 0.5 < step <= REACH
    np.testing.assert_array_equal(bounded, _argmax_keypoint(hm))


def test_bounded_keeps_the_half_pixel_step_at_the_heatmap_edge():
    """A keypoint just beyond the left edge: the raw argmax is on the edge, the replicate-padded
    log-map curves up along x there (a saddle), and the official step is half a pixel outward,
    toward the keypoint. It stays in the argmax's cell, so the bounded rule keeps it."""
    hm = _gaussian(-1.2, 16.0, 2.0)
    dxx, dyy, _ = _log_hessian(hm)
    assert dxx > 0 > dyy
    official, bounded = _decode_one(hm, "official"), _decode_one(hm, "bounded")
    step = (official - _argmax_keypoint(hm)) / SCALE
    assert step[0] == pytest.approx(-0.5, abs=1e-5)
    np.testing.assert_array_equal(bounded, official)


def test_bounded_returns_the_argmax_where_the_clamped_log_map_is_nearly_flat():
    """A faint map next to the 1e-3 clamp (a read-out's map of a keypoint it does not find): a spike
    and a broad bump beside it. The log-map's Hessian at the argmax is nearly singular, and the
    official step throws the keypoint far outside the heatmap (the constants: a random search over
    spike and bump for the longest official step)."""
    hm = 0.00068071580438879 * _gaussian(12 + 2.439340791775935, 16.0, 2.7107182895852926)
    hm[16, 12] = 0.0014210508514542384
    blurred = _blur_keep_peak(torch.from_numpy(hm[None]), 11)[0].numpy()
    assert (blurred[15:18, 11:14] < 1e-3).any()  # the clamp reaches the stencil
    official, bounded = _decode_one(hm, "official"), _decode_one(hm, "bounded")
    step = np.abs((official - _argmax_keypoint(hm)) / SCALE).max()
    print("official step (heatmap px):", step)
    assert step > 10 * max(HEATMAP)  # far outside the 24 x 32 heatmap
    np.testing.assert_array_equal(bounded, _argmax_keypoint(hm))


def test_bounded_keeps_only_steps_within_the_blur_reach():
    """A long step kept and a longer one dropped: spikes beside a peak, on a concave log-map."""
    kept = _gaussian(15.0, 16.0, 3.0)
    kept[16, 12] = 1.05  # the raw argmax, 3 px left of the peak: the step points at the peak
    step = np.abs((_decode_one(kept, "official") - _argmax_keypoint(kept)) / SCALE)
    print("kept step (heatmap px):", step.max())
    assert 1.0 < step.max() <= REACH
    np.testing.assert_array_equal(_decode_one(kept, "bounded"), _decode_one(kept, "official"))
    # a very broad peak 12 px below a spike that barely tops it: the log-map is concave but so flat
    # that the step overshoots the pixels it was read from
    dropped = 1.04 * _gaussian(12.0, 20.0, 20.0)
    dropped[8, 12] = 1.05
    dxx, dyy, dxy = _log_hessian(dropped)
    assert dxx < 0 and dxx * dyy - dxy**2 > 0  # negative definite
    step = np.abs((_decode_one(dropped, "official") - _argmax_keypoint(dropped)) / SCALE)
    print("dropped step (heatmap px):", step.max())
    assert step.max() > REACH
    np.testing.assert_array_equal(_decode_one(dropped, "bounded"), _argmax_keypoint(dropped))


def test_refine_rejects_an_unknown_rule():
    assert REFINE_RULES == ("official", "bounded")
    with pytest.raises(ValueError, match="refine must be one of"):
        udp_decode(np.zeros((1, 2, HEATMAP[1], HEATMAP[0]), np.float32), INPUT, HEATMAP, refine="clipped")


def test_bounded_keeps_unrefined_invalid_keypoints_and_tensors():
    hm = torch.from_numpy(_noisy_gaussian_maps(0.05, seed=3))
    hm[3] = -1.0  # no positive value: the keypoint is invalid and stays at heatmap (-1, -1)
    kpts, scores = udp_decode(hm, INPUT, HEATMAP, refine="bounded")
    assert isinstance(kpts, torch.Tensor) and kpts.shape == (1, 200, 2)
    np.testing.assert_allclose(kpts[0, 3].numpy(), -SCALE, rtol=1e-6)
    assert scores[0, 3] == -1.0
