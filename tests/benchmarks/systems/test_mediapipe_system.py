"""MediaPipe reference system: the landmark mapping, its subset on each split's keypoint set, the
evaluation plumbing (with an oracle stand-in, no mediapipe needed; on synthetic keypoints308 splits and
on real COCO, OCHuman and MPII photos imported from ../shared/real) and, when mediapipe 0.10.21 is
installed, real inference and records."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

import numpy as np
import pytest

from benchmarks.cli.main import main as cli_main
from benchmarks.systems import mediapipe_keypoints as MK
from benchmarks.systems import mediapipe_system as M
from sapiens2.datasets import open_split
from sapiens2.datasets.importers import import_dataset
from sapiens2.records.results import read_record
from sapiens2.reference import keypoints308
from sapiens2.vocab import VocabError, keypoint_set

HW = (128, 96)
SMALL = (48, 64)  # crop (w, h) for the oracle runs: small, the code path is the same
# real fixture split -> (import format, annotation file under ../shared/real, its keypoint set)
REAL = {"coco": ("coco", "coco/test_coco.json", "coco17"),
        "ochuman": ("ochuman", "ochuman/test_ochuman.json", "ochuman17"),
        "mpii": ("mpii", "mpii/test_mpii.json", "mpii16")}
# a keypoint set that names none of MediaPipe's landmarks
LETTERS = {"dataset_name": "letters17", "keypoints": [f"letter_{c}" for c in "abcdefghijklmnopq"],
           "sigmas": [0.05] * 17}


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("mp", n=3, size=HW, seed=3, root=tmp_path_factory.mktemp("synth"),
                                progress=False)


@pytest.fixture(scope="module")
def real_splits(real_dir, tmp_path_factory):
    """The real fixture photos imported as splits (pose only), by name of :data:`REAL`."""
    root = tmp_path_factory.mktemp("real")
    return {name: import_dataset(fmt, real_dir / src, root / name, masks=False)
            for name, (fmt, src, _) in REAL.items()}


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


def _gt_poses(split_dir, size, shift: float = 0.0):
    """MediaPipe results that put each shared landmark on the split's GT keypoint (+ ``shift`` crop px)."""
    ds = open_split(split_dir, "pose", input_size=size)
    subset = MK.shared_subset(ds.keypoint_set)
    out = []
    for i in range(len(ds)):
        s = ds[i]
        lm = np.zeros((33, 2))
        for m, vid in zip(subset.landmark_ids, subset.set_ids):
            lm[m] = s["keypoints"][vid].numpy() + shift
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
    ds = open_split(split, "seg")
    labels = [M.person_labels(ds[i]["label"]) for i in range(len(ds))]
    perfect = [M.PoseResult(np.zeros((33, 2)), np.ones(33), (lab == 1).astype(np.float32)) for lab in labels]
    oracle = _Oracle(perfect, selfie=np.zeros(labels[0].shape, np.float32))  # selfie: all background
    res, info = M.evaluate_masks(split, oracle, progress=False)
    assert res["pose"]["mIoU"] == pytest.approx(100.0)
    assert res["selfie"]["per_class"]["IoU"]["person"] == 0.0
    assert info["num_images"] == len(ds)


def test_keypoints308_subset_is_the_whole_map_with_its_protocol():
    """On keypoints308 splits the subset, its order, sigmas and protocol id are those of LANDMARK_MAP."""
    vocab = keypoints308()
    ids = {k["name"]: k["id"] for k in vocab["keypoints"]}
    sub = MK.shared_subset("keypoints308")
    assert sub.rows == M.LANDMARK_MAP and set(sub.rules) == {"same name"}
    assert list(sub.set_ids) == [ids[ours] for _, _, ours, _ in M.LANDMARK_MAP] == M.vocabulary_ids()
    assert sub.protocol_id == M.POSE_PROTOCOL_ID == "shared27-gtbox-v1"
    meta = sub.meta()
    assert meta["name"] == "keypoints308-shared-mediapipe27"
    assert meta["sigmas"] == [vocab["sigmas"][ids[ours]] for _, _, ours, _ in M.LANDMARK_MAP]
    assert meta == M.shared_meta()


@pytest.mark.parametrize("name", list(REAL))
def test_real_split_subset_is_its_keypoint_sets(real_splits, name):
    """The subset of a real split: the landmarks its set has, the set's own names, sigmas and flips."""
    ks = open_split(real_splits[name], "pose", input_size=SMALL).keypoint_set
    assert ks.name == REAL[name][2]
    sub = MK.shared_subset(ks)
    meta = sub.meta()
    expected = [ours for _, _, ours, _ in M.LANDMARK_MAP if ours in ks.names]
    assert meta["keypoints"] == expected == sub.names
    assert meta["sigmas"] == [float(ks.sigmas[ks.index(n)]) for n in expected]
    assert meta["name"] == f"{ks.name}-shared-mediapipe{len(expected)}"
    assert sub.protocol_id == f"shared{len(expected)}-{ks.name}-gtbox-v1" != M.POSE_PROTOCOL_ID
    assert meta["parts"] == {"body": list(range(len(expected)))}
    flips = set(meta["flip_pairs"])
    assert flips and all((b, a) in flips for a, b in flips)
    assert all(expected[a].split("_")[1:] == expected[b].split("_")[1:] for a, b in flips)
    if name == "mpii":  # MPII's own sigmas, not keypoints308's (shoulders 0.179 against 0.079)
        assert len(expected) == 12 and "head_top" not in expected
        assert meta["sigmas"][0] == pytest.approx(0.179)
    else:  # COCO-17 layout: all 17 body landmarks, in COCO order
        assert expected == list(ks.names)


@pytest.mark.parametrize("name", list(REAL))
def test_real_split_oracle_is_perfect_and_errors_cost(real_splits, name):
    split = real_splits[name]
    gt = _gt_poses(split, SMALL)
    metrics, info = M.evaluate_pose(split, _Oracle(gt), input_size=SMALL, progress=False)
    assert metrics["AP"] == pytest.approx(1.0) and metrics["AR"] == pytest.approx(1.0)
    sub = info["subset"]
    assert sub.keypoint_set.name == REAL[name][2] and info["num_instances"] == len(gt) >= 3
    assert metrics["conventions"]["keypoint_set"] == f"{REAL[name][2]}-shared-mediapipe{len(sub.rows)}"
    worse, missed = M.evaluate_pose(split, _Oracle(_gt_poses(split, SMALL), miss={0}), input_size=SMALL,
                                    progress=False)
    assert missed["missed_instances"] == 1 and worse["AR"] < 1.0
    off, _ = M.evaluate_pose(split, _Oracle(_gt_poses(split, SMALL, shift=3.0)), input_size=SMALL,
                             progress=False)
    assert off["AP"] < metrics["AP"]


def _with_keypoint_set(split, out, keypoint_set_dict):
    """A copy of ``split`` whose pose file declares ``keypoint_set_dict`` (names listed in the category)."""
    shutil.copytree(split, out)
    manifest = out / json.loads((out / "split.json").read_text())["tasks"]["pose"]
    coco = json.loads(manifest.read_text())
    coco["keypoint_set"] = keypoint_set_dict
    for cat in coco.get("categories", []):
        cat["keypoints"] = list(keypoint_set_dict["keypoints"])
    manifest.write_text(json.dumps(coco))
    return out


def test_real_split_is_scored_with_its_own_sigmas(real_splits, tmp_path):
    """Doubling the sigmas the split declares raises a shifted oracle's AP: they are the ones scored."""
    base = keypoint_set("mpii16").to_dict()
    wide_set = {**base, "dataset_name": "mpii16_wide", "sigmas": [2 * s for s in base["sigmas"]]}
    wide = _with_keypoint_set(real_splits["mpii"], tmp_path / "wide", wide_set)
    aps = {}
    for key, split in (("own", real_splits["mpii"]), ("wide", wide)):
        metrics, info = M.evaluate_pose(split, _Oracle(_gt_poses(split, SMALL, shift=2.0)), input_size=SMALL,
                                        progress=False)
        aps[key] = metrics["AP"]
    assert info["subset"].protocol_id == "shared12-mpii16_wide-gtbox-v1"
    assert aps["own"] < aps["wide"], aps


def test_split_without_shared_keypoints_is_a_clear_error(real_splits, tmp_path):
    bad = _with_keypoint_set(real_splits["coco"], tmp_path / "letters", LETTERS)
    oracle = _Oracle([])
    with pytest.raises(MK.NoSharedKeypoints, match=r"letters: keypoint set letters17 \(17 keypoints\)"):
        M.evaluate_pose(bad, oracle, input_size=SMALL, progress=False)
    assert oracle.calls == 0
    with pytest.raises(VocabError, match="h36m17 declares no OKS sigmas"):
        MK.shared_subset("h36m17").meta()


def test_wholebody_hand_knuckles_follow_the_declared_rule():
    """COCO-WholeBody: body and feet by name, the knuckle landmarks by the finger1 rule, the wrist by
    its own name (never the hand root, which the rule also maps to the wrist)."""
    sub = MK.shared_subset("coco_wholebody133")
    names = sub.landmark_names()
    assert len(sub.rows) == 25 and "MOUTH_LEFT" not in names  # the 68 iBUG face points have no 308 map
    assert names["LEFT_WRIST"] == "left_wrist" and names["LEFT_INDEX"] == "left_forefinger1"
    assert names["RIGHT_PINKY"] == "right_pinky_finger1" and names["LEFT_FOOT_INDEX"] == "left_big_toe"
    assert [r for r in sub.rules if r != "same name"] == ["finger1 (knuckle) = finger_third_joint"] * 4
    assert set(sub.meta()["parts"]) == {"body", "foot", "left_hand", "right_hand"}


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


@pytest.mark.mediapipe
def test_cli_on_real_coco_scores_the_coco17_subset(real_splits, tmp_path, capsys):
    code = cli_main(["system", "mediapipe", "--data", str(real_splits["coco"]), "--out", str(tmp_path),
                     "--tasks", "pose", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    pose = read_record(tmp_path / "mediapipe_pose.json")
    assert pose["protocol"]["protocol_id"] == "shared17-coco17-gtbox-v1"
    assert pose["conventions"]["keypoint_set"] == "coco17-shared-mediapipe17"
    assert pose["conventions"]["keypoint_subset"]["LEFT_WRIST"] == "left_wrist"
    assert len(pose["conventions"]["not_in_keypoint_set"]) == 10  # feet, mouth, hands
    assert 0.0 < pose["metrics"]["AP"] <= 1.0 and pose["dataset"]["num_samples"] >= 10


@pytest.mark.mediapipe
def test_cli_split_without_shared_keypoints_is_a_user_error(real_splits, tmp_path, capsys):
    bad = _with_keypoint_set(real_splits["coco"], tmp_path / "letters", LETTERS)
    code = cli_main(["system", "mediapipe", "--data", str(bad), "--out", str(tmp_path / "out"),
                     "--tasks", "pose", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "keypoint set letters17" in err and "Traceback" not in err, err
