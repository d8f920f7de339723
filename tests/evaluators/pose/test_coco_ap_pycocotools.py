"""The COCO-17 keypoint AP engine against pycocotools' ``COCOeval`` (the COCO reference implementation).

pycocotools (a core dependency: it decodes COCO masks) fixes the 17 COCO sigmas inside its ``Params``;
the engine is given the same sigmas from the ``coco17`` keypoint set, on generated edge cases and on
the real COCO-17 file of ``../shared/real`` with perturbed GT keypoints as results.
"""

from __future__ import annotations

import contextlib
import copy
import io

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_keypoints
from evaluators.pose.coco_io import load_coco_gt, load_coco_results
from evaluators.pose.metadata import load_meta
from evaluators.pose.synthetic import make_keypoint_case
from sapiens2.utils_io import read_json


def _pycocotools_stats(gt: dict, results: list[dict]) -> dict[str, float]:
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(results))
        ev = COCOeval(coco_gt, coco_dt, "keypoints")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return dict(zip(STAT_NAMES, (float(s) for s in ev.stats)))


def _ours(gt: dict, results: list[dict]) -> dict[str, float]:
    g, k = load_coco_gt(copy.deepcopy(gt))
    d = load_coco_results(copy.deepcopy(results), g, k)
    return evaluate_keypoints(g, d, load_meta("coco17").sigmas).stats


def test_coco17_sigmas_are_pycocotools_own():
    assert np.allclose(load_meta("coco17").sigmas, COCOeval(iouType="keypoints").params.kpt_oks_sigmas)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_pycocotools_on_generated_cases(seed):
    gt, results = make_keypoint_case(60, 17, seed=seed, categories=(1,))
    # Results whose every keypoint score is 0 are the one edge case where pycocotools and xtcocotools
    # (the official Sapiens evaluator's library, which the engine follows:
    # tests/evaluators/pose/test_coco_ap.py)
    # disagree; every other edge case of the generator (crowds, ties, empty images) stays in.
    zero = [r for r in results if max(r["keypoints"][2::3]) <= 0]
    assert zero, "the generator no longer makes all-zero-score results: drop this filter"
    results = [r for r in results if max(r["keypoints"][2::3]) > 0]
    assert any(a["iscrowd"] for a in gt["annotations"]) or seed % 2
    ours, ref = _ours(gt, results), _pycocotools_stats(gt, results)
    assert max(abs(ours[s] - ref[s]) for s in STAT_NAMES) <= 1e-9, (ours, ref)


def test_equals_pycocotools_on_real_coco_photos(shared_dir):
    gt = read_json(shared_dir / "real" / "coco" / "test_coco.json")
    rng = np.random.default_rng(0)
    results = []
    for ann in gt["annotations"]:
        k = np.asarray(ann["keypoints"], np.float64).reshape(-1, 3)
        if ann.get("iscrowd") or not (k[:, 2] > 0).any():
            continue
        scale = np.sqrt(max(ann["area"], 1.0))
        xy = k[:, :2] + rng.normal(0, 0.04 * scale, (len(k), 2))
        kp = np.concatenate([xy, np.ones((len(k), 1))], 1)
        results.append({"image_id": ann["image_id"], "category_id": 1, "keypoints": kp.ravel().tolist(),
                        "score": float(rng.uniform(0.5, 1.0))})
    assert len(results) >= 4
    ours, ref = _ours(gt, results), _pycocotools_stats(gt, results)
    assert 0.0 < ref["AP"] < 1.0  # perturbed enough to be a real test
    assert max(abs(ours[s] - ref[s]) for s in STAT_NAMES) <= 1e-9, (ours, ref)
