"""``predict --score-against``: a shipped-size pose model on a real COCO-WholeBody photo (../shared/real),
its 308 keypoints scored through the declared 308 -> WholeBody-133 map with WholeBody's sigmas.

The model is random (``--random-weights``), so its AP is ~0: these tests check the pipeline (people and
boxes from the file, the map, the 133-keypoint vocabulary and its sigmas, the 68 face points as misses,
the vocabulary named in the terminal and the score file), not a number of the paper.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks.cli.main import main
from sapiens2.vocab import WHOLEBODY_SPLIT_SIZES, keypoint_set

REAL = Path(os.environ.get("SAPIENS2_SHARED", Path(__file__).resolve().parents[4] / "shared")) / "real"
pytestmark = pytest.mark.usefixtures("real_dir")  # missing ../shared/real fails
WB = REAL / "coco" / "test_coco_wholebody.json"
PHOTO = REAL / "coco" / "000000000785.jpg"  # one person: 17 body, 6 foot and 68 face points labelled
FACE = [f"face-{i}" for i in range(68)]


def _annotation(image_id: int = 785) -> tuple[dict, np.ndarray]:
    """The photo's one annotation and its 133 x 3 keypoints, flattened here from the split fields."""
    ann = next(a for a in json.loads(WB.read_text())["annotations"] if a["image_id"] == image_id)
    return ann, np.concatenate([np.reshape(ann[f], (-1, 3)) for f in WHOLEBODY_SPLIT_SIZES]).astype(float)


def _shipped_size_config(tmp_path) -> Path:
    """The released sapiens2_0.4b pose config (1024x768 input, its 308-keypoint head) on the smallest
    official backbone, sapiens2_0.1b: 0.4b at random init takes ~90 s and 2.7 GB for one forward on the
    2-core CI machine (measured), 0.1b ~60 s and 1.6 GB under load."""
    from sapiens2.models.builder import official_config

    cfg = official_config("sapiens2_0.4b_keypoints308_shutterstock_goliath_3po-1024x768")
    cfg["backbone"]["arch"] = "sapiens2_0.1b"
    cfg["decode_head"]["in_channels"] = 768  # the 0.1b backbone's width
    path = tmp_path / "pose_0.1b.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.slow
def test_predict_shipped_size_model_on_a_wholebody_photo_and_score_it_in_133(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["predict", str(PHOTO), "--task", "pose", "--config", str(_shipped_size_config(tmp_path)),
            "--random-weights", "--no-flip-test", "--quiet", "--score-against", str(WB),
            "--vocabulary", "coco_wholebody133", "--out", str(out)]
    assert main(argv) == 0
    console = capsys.readouterr().out
    assert "in coco_wholebody133 (133 keypoints" in console and "65 of 133" in console
    assert "68 without a counterpart" in console and "RANDOM WEIGHTS" in console

    stem = out / "000000000785_pose_random-weights"
    pred, meta = np.load(f"{stem}.npy"), json.loads(Path(f"{stem}.json").read_text())
    ann, gt = _annotation()
    x, y, w, h = ann["bbox"]
    assert pred.shape == (1, 308, 3) and np.isfinite(pred).all()
    assert meta["input_size_hw"] == [1024, 768] and meta["arch"] == "sapiens2_0.1b"
    assert meta["instances"][0]["bbox_xyxy"] == pytest.approx([x, y, x + w, y + h])

    score = json.loads((out / "score_pose_coco_wholebody133_random-weights.json").read_text())
    assert score["vocabulary"]["keypoint_set"] == "coco_wholebody133"
    assert score["vocabulary"]["num_keypoints"] == 133
    assert score["conventions"]["keypoint_set"] == "coco_wholebody133"
    assert score["model"]["random_weights"] is True
    kmap = score["keypoint_map"]
    assert (kmap["source"], kmap["target"], kmap["mapped"]) == ("keypoints308", "coco_wholebody133", 65)
    assert kmap["unmapped"] == FACE and "misses" in kmap["unmapped_policy"]
    assert score["ground_truth"]["people"] == 1
    m = score["evaluator_metrics"]
    assert m["face/AP"] == 0.0  # 68 labelled face points, none predicted
    for part in ("body", "foot", "face", "left_hand", "right_hand"):
        assert part in score["parts"] and f"{part}/EPE" in m

    # the map applied, checked by name: the scored body and foot EPE equal the 308 predictions of the
    # same names against the file's own fields, in pixels of the 1024-high crop of the GT box
    k308, wb = keypoint_set("keypoints308"), keypoint_set("coco_wholebody133")
    crop_h = max(h, w * 4 / 3) * 1.25
    for part in ("body", "foot"):
        ids = wb.parts[part]
        src = [k308.index(wb.names[j]) for j in ids]
        err = np.linalg.norm(pred[0, src, :2] - gt[ids, :2], axis=1)[gt[ids, 2] > 0]
        assert m[f"{part}/EPE"] == pytest.approx(err.mean() * 1024 / crop_h, rel=1e-9)

    # the same predictions through `eval pose` (its own reader of the split layout and its own map)
    sub = json.loads(WB.read_text())
    sub["images"] = [im for im in sub["images"] if im["id"] == 785]
    sub["annotations"] = [a for a in sub["annotations"] if a["image_id"] == 785]
    (tmp_path / "gt.json").write_text(json.dumps(sub))
    res = [{"image_id": 785, "category_id": 1, "score": 1.0, "keypoints": pred[0].ravel().tolist()}]
    (tmp_path / "res.json").write_text(json.dumps(res))
    assert main(["eval", "pose", "--gt", str(tmp_path / "gt.json"), "--results", str(tmp_path / "res.json"),
                 "--results-keypoint-set", "keypoints308", "--json", str(tmp_path / "eval.json")]) == 0
    ev = json.loads((tmp_path / "eval.json").read_text())
    assert ev["conventions"]["keypoint_set"] == "coco_wholebody133"
    for part, row in score["parts"].items():
        for stat in ("AP", "AR"):
            assert row[stat] == pytest.approx(ev[part][stat], abs=1e-12), (part, stat)


def _oks_ap(d2: np.ndarray, sigmas: np.ndarray, area: float) -> float:
    """One detection on one GT: COCO's AP over OKS thresholds .50:.05:.95 is the share matched."""
    oks = np.mean(np.exp(-d2 / (2 * (2 * sigmas) ** 2 * (area + np.spacing(1)))))
    return float(np.mean([oks >= t for t in np.linspace(0.5, 0.95, 10)]))


def test_score_uses_wholebody_sigmas_and_counts_the_face_as_misses():
    """GT-exact 308 predictions (the file's own points put at their 308 names), feet moved by 20 px:
    body AP 1, face AP 0 (no counterpart), foot AP from COCO-WholeBody's published foot sigmas."""
    from benchmarks.reproduce.score_predictions import score_pose
    from sapiens2.datasets.coco_people import read_people
    from sapiens2.vocab_mapping import keypoint_mapping

    people = read_people(WB)
    assert people.keypoint_set.name == "coco_wholebody133"  # the split layout, chosen by its 133 points
    ann, gt = _annotation()
    m = keypoint_mapping("keypoints308", "coco_wholebody133")
    k308 = np.zeros((308, 3))
    for j in np.nonzero(m.mapped)[0][::-1]:  # the wrist gives the hand root too: the body's point wins
        k308[m.source_ids[j]] = (*gt[j, :2], 1.0)
    foot = keypoint_set("coco_wholebody133").parts["foot"]
    k308[m.source_ids[foot], 0] += 20.0
    score = score_pose(people, [(PHOTO, k308[None])])
    foot_sigmas = np.array([0.068, 0.066, 0.066, 0.092, 0.094, 0.094])  # COCO-WholeBody's description
    want = _oks_ap(np.full(6, 400.0), foot_sigmas, ann["area"])
    assert 0 < want < 1
    parts = score["parts"]
    assert parts["foot"]["AP"] == pytest.approx(want)
    assert parts["body"]["AP"] == pytest.approx(1.0) and parts["face"]["AP"] == 0.0
    assert parts["wholebody"]["AP"] == 0.0  # 68 of its 91 labelled points are misses: OKS < 0.5
    assert parts["left_hand"]["AP"] == -1.0  # no labelled hand point on this person: no GT
    pck = score["evaluator_metrics"]
    assert pck["face/PCK@0.1"] == 0.0 and pck["body/PCK@0.1"] == pytest.approx(1.0)


def test_boxes_from_predicts_every_annotated_person_and_bad_inputs_are_named(tmp_path, capsys):
    cfg = tmp_path / "tiny.json"
    cfg.write_text(json.dumps({"type": "PoseTopdownEstimator", "backbone": {"type": "Sapiens2", "arch": {
        "embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}, "img_size": [64, 48]},
        "decode_head": {"type": "PoseHeatmapHead", "in_channels": 32, "out_channels": 308,
                        "deconv_out_channels": [16, 16], "deconv_kernel_sizes": [4, 4],
                        "conv_out_channels": [16], "conv_kernel_sizes": [1]}}))
    photo = REAL / "coco" / "000000196141.jpg"  # 5 annotations: 4 with labelled keypoints, one without
    base = ["predict", str(photo), "--task", "pose", "--config", str(cfg), "--random-weights", "--quiet",
            "--no-flip-test", "--out", str(tmp_path / "out")]
    assert main([*base, "--boxes-from", str(REAL / "coco" / "test_coco.json")]) == 0
    meta = json.loads((tmp_path / "out" / "000000196141_pose_random-weights.json").read_text())
    boxes = [a["bbox"] for a in json.loads((REAL / "coco" / "test_coco.json").read_text())["annotations"]
             if a["image_id"] == 196141 and a["num_keypoints"] > 0 and not a["iscrowd"]]
    assert len(meta["instances"]) == len(boxes) == 4
    np.testing.assert_allclose([i["bbox_xyxy"] for i in meta["instances"]],
                               [[x, y, x + w, y + h] for x, y, w, h in boxes], rtol=1e-12)
    assert np.load(tmp_path / "out" / "000000196141_pose_random-weights.npy").shape == (4, 308, 3)
    capsys.readouterr()
    cases = [
        (["--score-against", str(WB), "--vocabulary", "coco17"], "133 keypoints per annotation, but the "
         "vocabulary coco17 has 17"),
        (["--score-against", str(WB), "--bbox", "1,1,50,50"], "--bbox and --score-against"),
        (["--vocabulary", "coco17"], "--vocabulary names the keypoint set of --boxes-from"),
        (["--score-against", str(REAL / "ochuman/test_ochuman.json")], "no image named '000000196141.jpg'"),
    ]
    for extra, why in cases:
        assert main([*base, *extra]) == 1, extra
        assert why in capsys.readouterr().err, extra
