"""COCO keypoint AP engine: golden case, equality with stock xtcocotools, parts, bad input, CLI."""

from __future__ import annotations

import argparse
import copy
import json

import numpy as np
import pytest

from evaluators.pose.coco_ap import STAT_NAMES, evaluate_keypoints
from evaluators.pose.coco_io import load_coco_gt, load_coco_results
from evaluators.pose.metadata import load_meta, meta_for_count
from evaluators.pose.synthetic import make_keypoint_case, restrict_to_keypoints, xtcocotools_stats
from sapiens2.utils_io import read_json


def _ours(gt, results, sigmas, ids=None, use_area=True):
    g, k = load_coco_gt(copy.deepcopy(gt), use_area=use_area)
    d = load_coco_results(copy.deepcopy(results), g, k)
    return evaluate_keypoints(g, d, sigmas, ids, use_area=use_area).stats


def _max_err(a, b):
    return max(abs(a[s] - b[s]) for s in STAT_NAMES)


def test_golden_pose_ap(golden_metrics):
    from evaluators.pose.parity import run_pose_case

    manifest = read_json(golden_metrics / "manifest.json")
    cases = [c for c in manifest["cases"] if c.get("kind") == "metric" and c.get("task") == "pose"]
    assert cases, f"no pose metric case in the golden manifest {golden_metrics / 'manifest.json'}"
    for case in cases:
        res = run_pose_case(case, golden_metrics, manifest)
        print(case["name"], "max abs err", res.max_abs_err)
        assert res.passed, res.message
        assert len(res.errors) == sum(len(v) for v in case["expected"].values())


@pytest.mark.xtcocotools
@pytest.mark.parametrize(
    "seed,num_kpts,cats", [(0, 17, (1,)), (1, 5, (1, 2)), (2, 12, (1,)), (3, 17, (1, 3))]
)
def test_equals_xtcocotools_on_edge_cases(seed, num_kpts, cats):
    gt, results = make_keypoint_case(60, num_kpts, seed=seed, categories=cats)
    anns = gt["annotations"]
    # the generated data really holds the edge cases
    assert any(a["iscrowd"] for a in anns) or seed % 2
    assert any(a["num_keypoints"] == 0 for a in anns) or seed % 2
    img_with_gt = {a["image_id"] for a in anns}
    img_with_res = {r["image_id"] for r in results}
    assert len(img_with_gt - img_with_res) > 0  # images without results
    scores = [r["score"] for r in results]
    assert len(set(scores)) < len(scores)  # score ties
    sigmas = np.random.default_rng(seed).uniform(0.025, 0.107, num_kpts)
    for use_area in (True, False):
        ref = xtcocotools_stats(gt, results, sigmas, use_area=use_area)
        ours = _ours(gt, results, sigmas, use_area=use_area)
        assert _max_err(ours, ref) <= 1e-6, (use_area, ours, ref)
    ids = [0, 2, 4]
    ref = xtcocotools_stats(*restrict_to_keypoints(gt, results, ids), sigmas[ids])
    assert _max_err(_ours(gt, results, sigmas, ids), ref) <= 1e-6


@pytest.mark.xtcocotools
def test_degenerate_cases_equal_xtcocotools():
    gt, results = make_keypoint_case(12, 6, seed=7)
    sig = np.full(6, 0.05)
    # results only in images without GT
    no_gt_images = [{"id": 1000 + i} for i in range(3)]
    gt2 = {**gt, "images": gt["images"] + no_gt_images}
    res2 = [{**r, "image_id": 1000 + i % 3} for i, r in enumerate(results[:10])]
    assert _max_err(_ours(gt2, res2, sig), xtcocotools_stats(gt2, res2, sig)) <= 1e-6
    # every GT crowd: no stat defined
    gt3 = copy.deepcopy(gt)
    for a in gt3["annotations"]:
        a["iscrowd"] = 1
    ours = _ours(gt3, results, sig)
    assert all(v == -1 for v in ours.values())
    assert _max_err(ours, xtcocotools_stats(gt3, results, sig)) <= 1e-6
    # no results at all
    g, k = load_coco_gt(gt)
    d = load_coco_results([], g, k)
    ours = evaluate_keypoints(g, d, sig).stats
    assert ours["AP"] == 0 and ours["AR"] == 0
    # more than 20 results in one image with identical scores (maxDets cut + ties)
    res4 = [{**copy.deepcopy(results[0]), "score": 0.5} for _ in range(30)] + results
    assert _max_err(_ours(gt, res4, sig), xtcocotools_stats(gt, res4, sig)) <= 1e-6


@pytest.mark.xtcocotools
def test_results_with_bbox_use_box_area():
    gt, results = make_keypoint_case(30, 8, seed=11)
    sig = np.full(8, 0.06)
    rng = np.random.default_rng(0)
    res = [
        {**r, "bbox": [0.0, 0.0, float(rng.uniform(10, 400)), float(rng.uniform(10, 400))]} for r in results
    ]
    assert _max_err(_ours(gt, res, sig), xtcocotools_stats(gt, res, sig)) <= 1e-6


def test_parts_of_keypoints308_and_builtin_meta():
    meta = load_meta(None)
    assert meta.num_keypoints == 308 and meta_for_count(308).name == meta.name
    with pytest.raises(ValueError, match="aic14.*crowdpose14|crowdpose14.*aic14"):
        meta_for_count(14)  # AI Challenger and CrowdPose both have 14: never chosen by the count
    assert sum(len(v) for v in meta.parts.values()) == 308
    coco = load_meta("coco17")
    assert coco.num_keypoints == 17 and coco.sigmas[0] == pytest.approx(0.026)
    with pytest.raises(ValueError, match="no built-in"):
        meta_for_count(5)
    with pytest.raises(ValueError, match="sigmas"):
        load_meta({"keypoints": ["a", "b"], "sigmas": [0.1]})


def _write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_bad_input_errors_name_file_and_record(tmp_path):
    gt, results = make_keypoint_case(5, 4, seed=1, edge_cases=False)
    gt_p = _write(tmp_path, "gt.json", gt)
    g, k = load_coco_gt(gt_p)
    bad = _write(tmp_path, "broken.json", '[{"image_id": 1,')
    with pytest.raises(ValueError, match="broken.json.*malformed JSON"):
        load_coco_results(bad, g, k)
    cases = {
        "missing_img.json": ({"image_id": 12345}, r"result\[0\].*12345.*not in the ground truth"),
        "short.json": ({"keypoints": [1.0, 2.0, 1.0]}, r"result\[0\].*3 values.*expected 12"),
        "nan.json": (
            {"keypoints": [float("nan")] + results[0]["keypoints"][1:]},
            r"result\[0\].*keypoint 0.*NaN",
        ),
        "score.json": ({"score": None}, r"result\[0\].*'score' must be a finite number"),
        "text.json": ({"keypoints": ["x"] * 12}, r"result\[0\].*non-numeric"),
    }
    for name, (patch, pattern) in cases.items():
        rec = {**results[0], **patch}
        p = _write(tmp_path, name, json.dumps([rec]))  # json writes NaN as a bare NaN token
        with pytest.raises(ValueError, match=f"{name}.*{pattern}"):
            load_coco_results(p, g, k)
    gt_bad = copy.deepcopy(gt)
    del gt_bad["annotations"][1]["area"]
    with pytest.raises(ValueError, match=r"gt_bad.json: annotations\[1\].*no 'area'"):
        load_coco_gt(_write(tmp_path, "gt_bad.json", gt_bad))
    gt_bad = copy.deepcopy(gt)
    gt_bad["annotations"][2]["keypoints"] = gt_bad["annotations"][2]["keypoints"][:-3]
    with pytest.raises(ValueError, match=r"annotations\[2\].*9 values.*expected 12"):
        load_coco_gt(_write(tmp_path, "gt_short.json", gt_bad))
    with pytest.raises(ValueError, match="not a JSON list|must be a JSON list"):
        load_coco_results(_write(tmp_path, "obj.json", {"a": 1}), g, k)


@pytest.mark.xtcocotools
def test_cli_writes_json_per_part(tmp_path, capsys):
    from evaluators.pose.cli import run_pose_eval

    meta = {
        "name": "tiny",
        "keypoints": [f"k{i}" for i in range(6)],
        "sigmas": [0.05] * 6,
        "parts": {"upper": [0, 1, 2], "lower": [3, 4, 5]},
    }
    gt, results = make_keypoint_case(20, 6, seed=2)
    args = argparse.Namespace(
        gt=str(_write(tmp_path, "gt.json", gt)),
        results=str(_write(tmp_path, "r.json", results)),
        meta=str(_write(tmp_path, "meta.json", meta)),
        json_out=str(tmp_path / "out" / "m.json"),
    )
    assert run_pose_eval(args) == 0
    out = read_json(tmp_path / "out" / "m.json")
    assert list(out) == ["wholebody", "upper", "lower", "conventions"]
    conv = out["conventions"]
    assert (conv["keypoint_set"], conv["whole_set"]) == ("tiny", "wholebody")
    assert conv["area"] == "the file's 'area'" and "iouType='keypoints')" in conv["evaluation"]
    assert list(out["wholebody"]) == list(STAT_NAMES)
    ref = xtcocotools_stats(*restrict_to_keypoints(gt, results, [3, 4, 5]), np.full(3, 0.05))
    assert _max_err(out["lower"], ref) <= 1e-6
    assert "wholebody" in capsys.readouterr().out


@pytest.mark.xtcocotools
def test_keypoints308_parts_equal_xtcocotools():
    meta = load_meta(None)
    gt, results = make_keypoint_case(15, 308, seed=5)
    for part, ids in meta.groups().items():
        sub = list(range(308)) if ids is None else ids
        ref = xtcocotools_stats(*restrict_to_keypoints(gt, results, sub), meta.sigmas[sub])
        assert _max_err(_ours(gt, results, meta.sigmas, ids), ref) <= 1e-6, part


@pytest.mark.xtcocotools
@pytest.mark.parametrize("seed", [0, 1])
def test_body_area_convention_equals_xtcocotools_wholebody_fields(seed):
    """Official convention: one detection area (box of its body keypoints) for every part.

    Reference: stock xtcocotools on the COCO-WholeBody split-field layout, where ``loadRes`` takes
    the area from ``keypoints`` (the body only) and ``iouType`` picks the part's field.
    """
    from evaluators.pose.coco_ap import evaluate_parts
    from evaluators.pose.metadata import meta_from_dict
    from evaluators.pose.synthetic import WHOLEBODY_FIELDS, to_wholebody_fields

    sizes = {"body": 17, "foot": 6, "face": 10, "left_hand": 5, "right_hand": 5}
    k = sum(sizes.values())
    rng = np.random.default_rng(seed)
    perm = rng.permutation(k)  # parts are not contiguous in the native order
    parts, start = {}, 0
    for part, n in sizes.items():
        parts[part] = sorted(int(i) for i in perm[start : start + n])
        start += n
    sigmas = rng.uniform(0.025, 0.107, k)
    meta = meta_from_dict(
        {"keypoints": [f"k{i}" for i in range(k)], "sigmas": sigmas.tolist(), "parts": parts}
    )
    gt, results = make_keypoint_case(80, k, seed=seed)
    for r in results:  # drop boxes: the area must come from the keypoints
        r.pop("bbox", None)
    areas = [a["area"] for a in gt["annotations"]]
    assert min(areas) < 32**2 and any(32**2 < a < 96**2 for a in areas) and max(areas) > 96**2

    g, kk = load_coco_gt(copy.deepcopy(gt))
    d = load_coco_results(copy.deepcopy(results), g, kk)
    ours = evaluate_parts(g, d, meta)
    per_part = evaluate_parts(g, d, meta, detection_area="part")
    split_gt, split_res = to_wholebody_fields(gt, results, parts)
    order = [i for part in WHOLEBODY_FIELDS for i in parts[part]]
    iou_types = {"wholebody": "keypoints_wholebody", "body": "keypoints_body", "foot": "keypoints_foot"}
    iou_types.update(face="keypoints_face", left_hand="keypoints_lefthand", right_hand="keypoints_righthand")
    for part, iou in iou_types.items():
        sig = sigmas[order] if part == "wholebody" else sigmas[parts[part]]
        ref = xtcocotools_stats(split_gt, split_res, sig, iou_type=iou)
        assert _max_err(ours[part], ref) <= 1e-6, (part, ours[part], ref)
    # the per-part convention really differs on the size-range stats (so the test can fail)
    diff = max(_max_err(ours[p], per_part[p]) for p in ("foot", "face", "left_hand", "right_hand"))
    assert diff > 1e-3


def _cli(argv, capsys):
    from benchmarks.cli.main import main

    code = main(["eval", "pose", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.xtcocotools
def test_cli_area_convention_from_the_file_and_metadata_message(tmp_path, capsys):
    """A GT without 'area' (CrowdPose / AIC / PoseTrack18 style) is scored with 0.53 x box, as
    xtcocotools' use_area=False, and says so; a GT where only some annotations have one is refused."""
    gt, results = make_keypoint_case(20, 17, seed=4, edge_cases=False)
    for a in gt["annotations"]:
        del a["area"]
    gt_p, res_p = _write(tmp_path, "gt.json", gt), _write(tmp_path, "res.json", results)
    out_p = tmp_path / "m.json"
    code, out, _ = _cli(
        ["--gt", str(gt_p), "--results", str(res_p), "--meta", "coco17", "--json", str(out_p)], capsys
    )
    assert code == 0 and "area: 0.53 x box w x h" in out
    assert "metadata: coco17 (17 keypoints, from --meta)" in out
    ref = xtcocotools_stats(gt, results, load_meta("coco17").sigmas, use_area=False)
    got = read_json(out_p)
    assert _max_err(got["body"], ref) <= 1e-6  # COCO-17 is a body set, not whole-body
    assert got["conventions"]["area"].startswith("0.53 x box")
    gt["annotations"][0]["area"] = 100.0
    _write(tmp_path, "gt.json", gt)
    code, _, err = _cli(["--gt", str(gt_p), "--results", str(res_p), "--meta", "coco17"], capsys)
    assert code == 1 and "annotations[1]" in err and "no 'area'" in err and "--no-area" in err
    code, out, _ = _cli(["--gt", str(gt_p), "--results", str(res_p), "--meta", "coco17", "--no-area"], capsys)
    assert code == 0 and "area: 0.53 x box" in out


def test_cli_unknown_names_or_shared_count_asks_for_meta(tmp_path, capsys):
    """17 keypoints named k0..k16 are no built-in set's: an error listing the 17-point sets and --meta,
    never COCO-17 by the count; without names, a count several sets share is an error too."""
    gt, results = make_keypoint_case(4, 17, seed=4, edge_cases=False)
    gt_p, res_p = _write(tmp_path, "gt.json", gt), _write(tmp_path, "res.json", results)
    code, _, err = _cli(["--gt", str(gt_p), "--results", str(res_p)], capsys)
    assert code == 1 and "are no built-in keypoint set's" in err and "--meta" in err
    assert all(n in err for n in ("coco17", "posetrack18", "h36m17"))
    nameless = {**gt, "categories": [{"id": c["id"], "name": c["name"]} for c in gt["categories"]]}
    code, _, err = _cli(["--gt", str(_write(tmp_path, "n.json", nameless)), "--results", str(res_p)], capsys)
    assert code == 1 and "lists no keypoint names" in err and "posetrack18" in err and "--meta" in err
    code, out, _ = _cli(["--gt", str(gt_p), "--results", str(res_p), "--meta", "coco17"], capsys)
    assert code == 0 and "from --meta" in out
    empty = _write(tmp_path, "empty_gt.json", {**nameless, "annotations": []})
    code, _, err = _cli(["--gt", str(empty), "--results", str(res_p)], capsys)
    assert code == 1 and "no annotation" in err and "--meta" in err
    code, _, err = _cli(["--gt", str(gt_p), "--results", str(res_p), "--meta", "keypoints308"], capsys)
    assert code == 1 and "3 x 308 keypoints" in err and "51 values" in err


@pytest.mark.xtcocotools
def test_cli_results_not_a_file_and_gt_without_categories(tmp_path, capsys):
    gt, results = make_keypoint_case(4, 17, seed=4, edge_cases=False)
    gt_p, res_p = _write(tmp_path, "gt.json", gt), _write(tmp_path, "res.json", results)
    code, _, err = _cli(["--meta", "coco17", "--gt", str(gt_p), "--results", "/dev/null"], capsys)
    assert code == 1 and "/dev/null: not a regular file" in err and "no such file" not in err
    code, _, err = _cli(["--meta", "coco17", "--gt", str(gt_p), "--results", str(tmp_path)], capsys)
    assert code == 1 and "is a directory" in err
    code, _, err = _cli(
        ["--meta", "coco17", "--gt", str(gt_p), "--results", str(_write(tmp_path, "e.json", ""))], capsys
    )
    assert code == 1 and "empty file" in err
    nocat = {k: v for k, v in gt.items() if k != "categories"}
    code, _, err = _cli(
        ["--meta", "coco17", "--gt", str(_write(tmp_path, "nocat.json", nocat)), "--results", str(res_p)],
        capsys,
    )
    assert code == 1 and "missing the 'categories' list" in err
    with pytest.raises(KeyError, match="categories"):  # the reference refuses such a GT too
        xtcocotools_stats(nocat, results, load_meta("coco17").sigmas)


def test_cli_parts_computes_only_what_is_asked(tmp_path, capsys):
    gt, results = make_keypoint_case(6, 308, seed=4, edge_cases=False)
    gt_p, res_p = _write(tmp_path, "gt.json", gt), _write(tmp_path, "res.json", results)
    out_p = tmp_path / "m.json"
    code, _, _ = _cli(
        ["--gt", str(gt_p), "--results", str(res_p), "--parts", "body,wholebody", "--json", str(out_p)],
        capsys,
    )
    assert code == 0 and list(read_json(out_p)) == ["wholebody", "body", "conventions"]
    code, _, err = _cli(["--gt", str(gt_p), "--results", str(res_p), "--parts", "torso"], capsys)
    assert code == 1 and "torso" in err and "left_hand" in err


def test_pose_file_path_imports_no_torch():
    """The pose-from-files path (CLI, readers, AP engine, metadata) loads neither torch nor mmengine."""
    import subprocess
    import sys

    code = (
        "import sys, benchmarks.cli.main, evaluators, evaluators.pose, evaluators.pose.cli\n"
        "import evaluators.pose.coco_io, evaluators.pose.coco_ap, evaluators.pose.metadata\n"
        "evaluators.pose.metadata.load_meta(None)\n"
        "print(sorted(m for m in ('torch', 'mmengine') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
