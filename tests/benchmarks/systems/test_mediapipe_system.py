"""MediaPipe reference system: the landmark mapping, the evaluation plumbing (with an oracle
stand-in, no mediapipe needed) and, when mediapipe 0.10.21 is installed, real inference and records."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

from benchmarks.systems import mediapipe_system as M
from sapiens2.reference import keypoints308

HW = (128, 96)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("mp", n=3, size=HW, seed=3, root=tmp_path_factory.mktemp("synth"),
                                progress=False)


def test_mapping_names_exist_and_sides_agree():
    vocab = {k["name"]: k for k in keypoints308()["keypoints"]}
    mp_idx = [m for m, _, _, _ in M.LANDMARK_MAP]
    ours = [o for _, _, o, _ in M.LANDMARK_MAP]
    assert len(set(mp_idx)) == len(mp_idx) and len(set(ours)) == len(ours)
    missing = [o for o in ours if o not in vocab]
    assert not missing, f"not in keypoints308: {missing}"
    mp_names = {n for _, n, _, _ in M.LANDMARK_MAP}
    assert not mp_names & set(M.LEFT_OUT), "a landmark is both mapped and left out"
    assert len(mp_names) + len(M.LEFT_OUT) == 33, "every one of the 33 landmarks is mapped or left out"
    for _, mp_name, o, _ in M.LANDMARK_MAP:
        side = mp_name.split("_")[0]
        if side in ("LEFT", "RIGHT"):
            assert o.startswith((side.lower() + "_", side[0].lower() + "_")), (mp_name, o)
        elif mp_name.startswith("MOUTH_"):
            assert o.startswith(mp_name.split("_")[1][0].lower() + "_"), (mp_name, o)


def test_shared_meta_loads_with_vocabulary_sigmas():
    from evaluators.pose import load_meta

    d = M.shared_meta()
    meta = load_meta(d)
    vocab = keypoints308()
    ids = M.vocabulary_ids()
    assert meta.num_keypoints == len(M.LANDMARK_MAP) == len(ids)
    np.testing.assert_allclose(meta.sigmas, [vocab["sigmas"][i] for i in ids])
    assert set(meta.parts) == {"body", "foot", "face", "left_hand", "right_hand"}
    assert len(meta.parts["body"]) == 17
    pairs = set(meta.flip_pairs)
    assert all((b, a) in pairs for a, b in pairs) and len(pairs) == 26  # all but nose paired


@pytest.mark.mediapipe
def test_mapping_matches_mediapipe_enum():
    mp = M.require_mediapipe()
    enum = mp.solutions.pose.PoseLandmark
    for idx, name, _, _ in M.LANDMARK_MAP:
        assert enum[name].value == idx
    for name in M.LEFT_OUT:
        assert name in enum.__members__


class _Oracle:
    """Stand-in for MediaPipeSystem: returns prepared pose results in call order (None = missed)
    and a fixed selfie mask."""

    def __init__(self, results, miss=(), selfie=None):
        self.results, self.miss, self.selfie, self.calls = list(results), set(miss), selfie, 0

    def pose(self, image):
        self.calls += 1
        res = self.results.pop(0)
        return None if self.calls - 1 in self.miss else res

    def selfie_mask(self, image):
        return self.selfie


def _gt_poses(split_dir, size):
    from sapiens2.datasets import open_split

    ds = open_split(split_dir, "pose", input_size=size)
    out = []
    for i in range(len(ds)):
        s = ds[i]
        lm = np.zeros((33, 2))
        for (m, _, _, _), vid in zip(M.LANDMARK_MAP, M.vocabulary_ids()):
            lm[m] = s["keypoints"][vid].numpy()
        out.append(M.PoseResult(lm, np.ones(33), None))
    return out


def test_evaluate_pose_oracle_is_perfect_and_misses_cost_recall(split):
    size = (48, 64)
    gt = _gt_poses(split, size)
    assert len(gt) >= 2
    metrics, info = M.evaluate_pose(split, _Oracle(gt), input_size=size, progress=False)
    assert metrics["AP"] == pytest.approx(1.0) and metrics["body/AP"] == pytest.approx(1.0)
    assert info["missed_instances"] == 0 and info["num_instances"] == len(gt)
    assert metrics["conventions"]["keypoint_set"].startswith("keypoints308-shared-mediapipe")
    worse, info = M.evaluate_pose(split, _Oracle(_gt_poses(split, size), miss={0}), input_size=size,
                                  progress=False)
    assert info["missed_instances"] == 1
    assert worse["AR"] < 1.0
    # an offset of a few crop pixels must lower AP: the coordinates really reach the evaluator
    shifted = [M.PoseResult(r.landmarks + 6.0, r.visibility, None) for r in _gt_poses(split, size)]
    off, _ = M.evaluate_pose(split, _Oracle(shifted), input_size=size, progress=False)
    assert off["AP"] < metrics["AP"]


def test_evaluate_masks_oracle(split):
    from sapiens2.datasets import open_split

    ds = open_split(split, "seg")
    labels = [M.person_labels(ds[i]["label"]) for i in range(len(ds))]
    perfect = [M.PoseResult(np.zeros((33, 2)), np.ones(33), (lab == 1).astype(np.float32)) for lab in labels]
    oracle = _Oracle(perfect, selfie=np.zeros(labels[0].shape, np.float32))  # selfie: all background
    res, info = M.evaluate_masks(split, oracle, progress=False)
    assert res["pose"]["mIoU"] == pytest.approx(100.0)
    assert res["selfie"]["per_class"]["IoU"]["person"] == 0.0
    assert info["num_images"] == len(ds)


def test_missing_mediapipe_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "mediapipe", None)
    with pytest.raises(RuntimeError, match="install_mediapipe.sh"):
        M.require_mediapipe()


@pytest.mark.mediapipe
def test_real_inference_on_astronaut():
    import skimage.data

    img = skimage.data.astronaut()
    with M.MediaPipeSystem() as system:
        res = system.pose(img)
        selfie = system.selfie_mask(img)
    assert res is not None, "MediaPipe found no person in skimage's astronaut"
    nose, vis = res.landmarks[0], res.visibility[0]
    # the astronaut's face is in the upper-left-centre of the 512 x 512 photo
    assert 150 < nose[0] < 300 and 60 < nose[1] < 200 and vis > 0.5, (nose, vis)
    assert res.mask.shape == img.shape[:2] and selfie.shape == img.shape[:2]
    assert 0.2 < (res.mask > 0.5).mean() < 0.8


@pytest.mark.mediapipe
def test_cli_writes_valid_records(split, tmp_path):
    from benchmarks.cli.parsers import system
    from sapiens2.records.results import read_record

    p = argparse.ArgumentParser()
    system.register(p.add_subparsers(dest="command"))
    args = p.parse_args(["system", "mediapipe", "--data", str(split), "--out", str(tmp_path), "--n", "2",
                         "--no-progress"])
    assert args.func(args) == 0
    pose = read_record(tmp_path / "mediapipe_pose.json")
    assert pose["protocol"] == {"kind": "eval", "protocol_id": M.POSE_PROTOCOL_ID,
                                "description": pose["protocol"]["description"]}
    assert pose["dataset"]["split"] == "first2"
    for key in ("AP", "body/AP", "foot/AP", "left_hand/AP"):
        assert 0.0 <= pose["metrics"][key] <= 1.0
    assert pose["conventions"]["keypoint_subset"]["LEFT_INDEX"] == "left_forefinger_third_joint"
    for name in ("pose", "selfie"):
        seg = read_record(tmp_path / f"mediapipe_{name}_seg.json")
        assert seg["task"] == "seg" and seg["protocol"]["protocol_id"] == M.SEG_PROTOCOL_ID
        assert 0.0 <= seg["metrics"]["mIoU"] <= 100.0
        assert set(seg["breakdowns"]["IoU per class"]) == {"background", "person"}
