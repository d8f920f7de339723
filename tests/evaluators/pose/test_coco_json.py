"""Reading COCO keypoint files: the lean simdjson path gives the general parser's arrays and errors."""

from __future__ import annotations

import copy
import json
import sys

import numpy as np
import pytest

from evaluators.pose import coco_io
from evaluators.pose.coco_ap import STAT_NAMES, evaluate_keypoints
from evaluators.pose.coco_io import load_coco_gt, load_coco_results
from evaluators.pose.coco_json import read_coco_lean
from evaluators.pose.synthetic import make_keypoint_case


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _tricky_case():
    """Integer keypoints, exponents, -0, extra fields the loaders never read."""
    gt, results = make_keypoint_case(40, 7, seed=3)
    for i, a in enumerate(gt["annotations"]):
        a["segmentation"] = [[1.0, 2.0, 3.0, 4.0]]
        if i % 3 == 0:
            a["keypoints"] = [int(round(v)) for v in a["keypoints"]]
    gt["info"] = {"description": "x"}
    for i, r in enumerate(results):
        if i % 4 == 0:
            r["keypoints"] = [int(round(v)) for v in r["keypoints"]]
        r["extra"] = {"nested": [1, 2]}
    results[1]["keypoints"][0] = 1.5e-7
    results[2]["keypoints"][1] = -0.0
    return gt, results


def _arrays(g, d):
    return {
        "gt_kpts": g.keypoints, "gt_area": g.area, "gt_bbox": g.bbox, "gt_img": g.image_index,
        "gt_cat": g.category, "crowd": g.iscrowd, "det_kpts": d.keypoints, "score": d.score,
        "det_img": d.image_index, "det_cat": d.category,
    }  # fmt: skip


def test_lean_and_general_paths_give_identical_arrays_and_stats(tmp_path, monkeypatch):
    gt, results = _tricky_case()
    gt_p, res_p = _write(tmp_path, "gt.json", gt), _write(tmp_path, "res.json", results)
    assert read_coco_lean(gt_p, "gt") is not None and read_coco_lean(res_p, "results") is not None
    g1, k = load_coco_gt(gt_p)
    d1 = load_coco_results(res_p, g1, k)
    g2, _ = load_coco_gt(copy.deepcopy(gt))  # plain Python lists: the general path
    d2 = load_coco_results(copy.deepcopy(results), g2, k)
    monkeypatch.setitem(sys.modules, "simdjson", None)  # no pysimdjson: orjson/json read the files
    assert read_coco_lean(gt_p, "gt") is None
    g3, _ = load_coco_gt(gt_p)
    d3 = load_coco_results(res_p, g3, k)
    a1, a2, a3 = _arrays(g1, d1), _arrays(g2, d2), _arrays(g3, d3)
    for name in a1:
        assert np.array_equal(a1[name], a2[name]) and np.array_equal(a1[name], a3[name]), name
    assert g1.image_ids == g2.image_ids and g1.category_ids == g2.category_ids
    sig = np.full(k, 0.05)
    s1, s2 = evaluate_keypoints(g1, d1, sig).stats, evaluate_keypoints(g2, d2, sig).stats
    assert [s1[s] for s in STAT_NAMES] == [s2[s] for s in STAT_NAMES]


def test_lean_reader_keeps_only_read_fields_and_arrays(tmp_path):
    """Fields the loaders never read are not materialised; keypoints arrive as float64 arrays."""
    gt, results = _tricky_case()
    g = read_coco_lean(_write(tmp_path, "gt.json", gt), "gt")
    r = read_coco_lean(_write(tmp_path, "res.json", results), "results")
    assert set(g) == {"images", "annotations", "categories"}
    assert "segmentation" not in g["annotations"][0] and set(g["images"][0]) == {"id"}
    assert g["categories"] == gt["categories"]
    kp = r[0]["keypoints"]
    assert isinstance(kp, np.ndarray) and kp.dtype == np.float64 and kp.tolist() == results[0]["keypoints"]
    assert "extra" not in r[0] and r[1]["keypoints"][0] == 1.5e-7


def test_files_the_lean_path_does_not_reproduce_go_to_the_general_parser(tmp_path):
    gt, results = make_keypoint_case(5, 4, seed=1, edge_cases=False)
    g, k = load_coco_gt(_write(tmp_path, "gt.json", gt))
    rec = json.dumps(results[0])
    # a repeated key: json keeps the last value (here a wrong length, so the error shows which won)
    dup = rec[:-1] + ', "keypoints": [1, 2, 1]}'
    p = _write(tmp_path, "dup.json", "[" + dup + "]")
    assert read_coco_lean(p, "results") is None
    with pytest.raises(ValueError, match=r"dup.json.*result\[0\].*3 values"):
        load_coco_results(p, g, k)
    # NaN tokens (json accepts them): the NaN check names the record and keypoint
    nan = {**results[0], "keypoints": [1.0, float("nan")] + results[0]["keypoints"][2:]}
    p = _write(tmp_path, "nan.json", json.dumps([results[1], nan]))
    assert read_coco_lean(p, "results") is None
    with pytest.raises(ValueError, match=r"nan.json.*result\[1\].*keypoint 0.*NaN"):
        load_coco_results(p, g, k)
    # nested lists and booleans are not flat numbers: the loaders see plain lists and say so
    nested = {**results[0], "keypoints": [[1.0, 2.0, 1.0]] * 4}
    with pytest.raises(ValueError, match=r"nested.json.*result\[0\]"):
        load_coco_results(_write(tmp_path, "nested.json", [nested]), g, k)
    flags = {**results[0], "keypoints": [True] * 12}
    lean = read_coco_lean(_write(tmp_path, "flags.json", [flags]), "results")
    assert lean[0]["keypoints"] == [True] * 12  # a plain list, as json gives it


def test_nonfinite_keypoint_in_a_later_chunk_names_its_record():
    gt, results = make_keypoint_case(200, 3, seed=2, edge_cases=False)
    g, k = load_coco_gt(gt)
    assert len(results) > 300
    results[300]["keypoints"][4] = float("inf")
    with pytest.raises(ValueError, match=r"result\[300\].*keypoint 1 has a NaN or Inf"):
        load_coco_results(results, g, k)
    arrays = [np.asarray(r["keypoints"], dtype=np.float64) for r in results[:300]]
    mixed = [{**r, "keypoints": a} for r, a in zip(results, arrays)] + results[300:]
    mixed[300]["keypoints"][4] = 1.0  # lists and arrays mixed: one planar N x K x 3 array
    d = load_coco_results(mixed, g, k)
    want = np.array([r["keypoints"] for r in results], dtype=np.float64)
    want[300, 4] = 1.0
    assert np.array_equal(d.keypoints.reshape(len(results), -1), want)
    assert d.keypoints[..., 0].flags.c_contiguous  # stored plane by plane


def test_read_coco_file_checks_the_path_first(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        coco_io.read_coco_file(tmp_path / "missing.json", "COCO keypoint results", "results")
    with pytest.raises(ValueError, match="is a directory"):
        coco_io.read_coco_file(tmp_path, "COCO keypoint results", "results")
    with pytest.raises(ValueError, match="malformed JSON"):
        coco_io.read_coco_file(_write(tmp_path, "bad.json", "[{"), "COCO keypoint results", "results")
