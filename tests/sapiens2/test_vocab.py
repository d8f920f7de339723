"""The vocabulary registry (sapiens2.vocab) and the declared maps between vocabularies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from sapiens2 import vocab
from sapiens2.vocab_mapping import keypoint_mapping, label_mapping, map_keypoints, remap_labels

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[3] / "shared")) / "real"


def test_builtin_keypoint_sets_are_consistent():
    sizes = {"keypoints308": 308, "coco17": 17, "coco_wholebody133": 133, "mpii16": 16, "crowdpose14": 14,
             "ochuman17": 17, "halpe136": 136, "aic14": 14, "h36m17": 17, "posetrack18": 17,
             "humanart21": 21}  # fmt: skip
    assert set(vocab.keypoint_sets()) == set(sizes)
    for name, k in sizes.items():
        ks = vocab.keypoint_set(name)
        if name == "h36m17":  # Human3.6M declares no OKS sigmas (mmpose's h36m.py: sigmas=[])
            assert ks.sigmas is None
            with pytest.raises(vocab.VocabError, match="h36m17 declares no OKS sigmas.*MPJPE"):
                ks.require_sigmas()
            continue
        assert ks.num_keypoints == k and ks.sigmas.shape == (k,) and (ks.sigmas > 0).all()
        assert all(0 <= i < k for p in ks.flip_pairs for i in p) and all(
            0 <= i < k for p in ks.skeleton for i in p
        )
        flips = dict(ks.flip_pairs)
        assert all(flips.get(b) == a for a, b in ks.flip_pairs), name  # partners are symmetric
        if ks.parts:
            covered = sorted(i for ids in ks.parts.values() for i in ids)
            assert covered == list(range(k)) or name == "keypoints308"
    assert (
        vocab.keypoint_set("coco").name == "coco17"
        and vocab.keypoint_set("COCO-WholeBody").num_keypoints == 133
    )
    assert (
        vocab.keypoint_set("coco17").whole_name == "body"
        and vocab.keypoint_set("halpe").whole_name == "wholebody"
    )
    wb, coco = vocab.keypoint_set("coco_wholebody133"), vocab.keypoint_set("coco17")
    assert wb.names[:17] == coco.names and np.array_equal(wb.sigmas[:17], coco.sigmas)
    with pytest.raises(vocab.VocabError, match="unknown keypoint set 'nope'"):
        vocab.keypoint_set("nope")


def test_keypoint_sets_against_mmpose_descriptions():
    if not (REAL / "meta").is_dir():
        pytest.skip(f"{REAL / 'meta'} is not present")
    import importlib.util
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    spec = importlib.util.spec_from_file_location("build_vocab", sys.path[0] + "/build_vocab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.path.pop(0)
    for name in mod.SETS:  # the shipped JSON is what the description gives
        shipped = json.loads((vocab.VOCAB_DIR / f"{name}.json").read_text())
        assert shipped == json.loads(json.dumps(mod.build(name, REAL / "meta"))), name


def test_user_keypoint_and_label_sets(tmp_path):
    p = tmp_path / "hand.json"
    p.write_text(json.dumps({"dataset_name": "hand3", "keypoints": ["a", "b", "c"], "sigmas": [0.1, 0.1, 0.2],
                             "parts": {"tips": [1, 2]}, "flip_pairs": [[1, 2], [2, 1]]}))  # fmt: skip
    ks = vocab.keypoint_set(str(p))
    assert ks.name == "hand3" and ks.parts == {"tips": [1, 2]} and ks.whole_name == "wholebody"
    p.write_text(json.dumps({"keypoints": ["a", "b"], "sigmas": [0.1]}))
    with pytest.raises(vocab.VocabError, match="'sigmas' must list 2"):
        vocab.keypoint_set(str(p))
    ls = vocab.label_set(["bg", "cat", "dog"])
    assert ls.num_classes == 3 and ls.ignore_index == 255
    with pytest.raises(vocab.VocabError, match="ignore_index 1 is a class id"):
        vocab.label_set({"classes": ["a", "b"], "ignore_index": 1})
    lip = vocab.label_set("lip")
    assert (
        lip.num_classes == 20
        and lip.names[13] == "Face"
        and vocab.label_set("cihp20").names[10] == "Torso-skin"
    )
    assert vocab.label_set("atr18").num_classes == 18 and vocab.label_set("ppp7").names[1] == "Head"


def test_308_maps_to_coco17_and_wholebody_by_name():
    k308, coco, wb = (vocab.keypoint_set(n) for n in ("keypoints308", "coco17", "coco_wholebody133"))
    m = keypoint_mapping(k308, coco)
    assert m.mapped.all() and [k308.names[i] for i in m.source_ids] == list(coco.names)
    m = keypoint_mapping(k308, wb)
    assert int(m.mapped.sum()) == 17 + 6 + 42
    assert m.unmapped_names(wb) == [f"face-{i}" for i in range(68)]
    assert k308.names[m.source_ids[wb.index("left_hand_root")]] == "left_wrist"
    assert k308.names[m.source_ids[wb.index("right_pinky_finger1")]] == "right_pinky_finger_third_joint"
    assert k308.names[m.source_ids[wb.index("right_pinky_finger4")]] == "right_pinky_finger4"
    xy = np.random.default_rng(0).uniform(0, 100, (2, 308, 2))
    out_xy, out_s = map_keypoints(xy, np.ones((2, 308)), m)
    assert out_xy.shape == (2, 133, 2) and (out_s[:, 23:91] == 0).all() and (out_s[:, :23] == 1).all()
    np.testing.assert_array_equal(out_xy[:, 9], xy[:, k308.index("left_wrist")])


def test_29_classes_map_to_person_and_pascal_parts():
    s29 = vocab.label_set("sapiens2_29")
    person = label_mapping(s29, "person2")
    assert person.lut[0] == 0 and (person.lut[1:] == 1).all()
    ppp = label_mapping(s29, "pascal_person_part7")
    lab = np.array([[s29.names.index("Left_Hand"), s29.names.index("Hair"), 255]])
    np.testing.assert_array_equal(remap_labels(lab, ppp), [[4, 1, 255]])  # lower arms, head, ignored
    trousers = np.array([[s29.names.index("Lower_Clothing")]])
    with pytest.raises(vocab.VocabError, match="Lower_Clothing.*no target class"):
        remap_labels(trousers, ppp)
    assert remap_labels(trousers, ppp, unmapped="ignore")[0, 0] == 255
    with pytest.raises(vocab.VocabError, match="declares no many-to-one map from sapiens2_29"):
        label_mapping(s29, "lip20")


@pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
def test_eval_scores_308_results_on_the_wholebody_file(tmp_path):
    from evaluators.pose.cli import evaluate_files

    gt_path = REAL / "coco" / "test_coco_wholebody.json"
    gt = json.loads(gt_path.read_text())
    k308, wb = vocab.keypoint_set("keypoints308"), vocab.keypoint_set("coco_wholebody133")
    m = keypoint_mapping(k308, wb)
    rng = np.random.default_rng(0)
    res308, res133 = [], []
    for ann in gt["annotations"]:
        flat = np.concatenate([np.reshape(ann[f], (-1, 3)) for f in vocab.WHOLEBODY_SPLIT_SIZES])
        flat[:, :2] += rng.normal(0, 3, (133, 2))
        flat[:, 2] = 0.9
        k = np.zeros((308, 3))
        k[m.source_ids[m.mapped]] = flat[m.mapped]
        res308.append(
            {"image_id": ann["image_id"], "category_id": 1, "score": 0.9, "keypoints": k.ravel().tolist()}
        )
        # wrist and hand root share the 308 wrist: the 133 file holds that one point twice
        flat[m.mapped] = k[m.source_ids[m.mapped]]
        flat[~m.mapped] = 0
        res133.append(
            {"image_id": ann["image_id"], "category_id": 1, "score": 0.9, "keypoints": flat.ravel().tolist()}
        )
    (tmp_path / "r308.json").write_text(json.dumps(res308))
    (tmp_path / "r133.json").write_text(json.dumps(res133))
    info: list[str] = []
    mapped = evaluate_files(gt_path, tmp_path / "r308.json", info=info, results_keypoint_set="keypoints308")
    direct = evaluate_files(gt_path, tmp_path / "r133.json")
    assert mapped == direct and mapped["body"]["AP"] > 0.3
    assert "65 of 133 keypoints" in info[-1] and "face-0" in info[-1]
    with pytest.raises(ValueError, match="expected 924"):
        evaluate_files(gt_path, tmp_path / "r133.json", results_keypoint_set="keypoints308")
