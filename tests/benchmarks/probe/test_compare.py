"""Paired bootstrap comparisons: side files, the paired interval against a brute-force loop, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.cli.main import main  # noqa: E402
from benchmarks.probe.records.compare import (  # noqa: E402
    comparisons_from_records,
    format_comparisons,
    paired_comparisons,
    paired_difference,
)
from benchmarks.probe.records.evaluate import bootstrap_intervals_field  # noqa: E402
from benchmarks.probe.records.sidefile import content_sha256, images_sha256, read_side_file, side_path  # noqa: E402
from evaluators.bootstrap import resample_indices  # noqa: E402
from sapiens2.records.results import load_records, make_record, read_record, write_record  # noqa: E402
from tests.evaluators.test_ddp import build, make_dataset, run_over  # noqa: E402

KEYS = ["mIoU", "mAcc", "aAcc"]
N = 7


def seg_items(n: int, pred_seed: int) -> list[tuple]:
    """Seg samples with the GT of ``make_dataset`` and logits drawn from ``pred_seed`` (0: its own)."""
    items = make_dataset("seg", n)
    if pred_seed == 0:
        return items
    g = torch.Generator().manual_seed(pred_seed)
    # noisy logits that favour the true class a little: correlated with the GT, like a real backbone
    out = []
    for logits, gt in items:
        onehot = torch.nn.functional.one_hot(gt.clamp(max=4)[::2, ::2], 5).permute(2, 0, 1).float()
        out.append((torch.randn(logits.shape, generator=g) + 1.5 * onehot, gt))
    return out


def seg_evaluator(items, indices=None):
    """A seg evaluator over ``items``, sample ``i`` under dataset index ``indices[i]`` (default ``i``)."""
    ev = build("seg")
    if indices is None:
        run_over(ev, items, list(range(len(items))))
        return ev
    for i, (logits, gt) in enumerate(items):
        ev.update(logits[None], gt[None], index=[indices[i]])
    return ev


def test_record_bounds_equal_bootstrap_intervals_and_side_file_round_trips(tmp_path):
    ev = seg_evaluator(seg_items(N, 0))
    path = tmp_path / "seed0.bootstrap.npz"
    iv = bootstrap_intervals_field(ev, KEYS, resamples=60, level=0.9, seed=3, side_path=path)
    ref = ev.bootstrap_intervals(KEYS, resamples=60, level=0.9, seed=3)
    assert iv["bounds"] == {k: [lo, hi] for k, (lo, hi) in ref.items()}  # exactly equal
    assert (iv["n"], iv["resamples"], iv["seed"], iv["side_file"]) == (N, 60, 3, path.name)
    dists, ids = read_side_file(path)
    want = ev.bootstrap_distribution(KEYS, resamples=60, seed=3)
    assert sorted(dists) == sorted(KEYS)
    for k in KEYS:
        assert dists[k].dtype == np.float64 and np.array_equal(dists[k], want[k])
    assert ids.tolist() == ev.sample_rows()[0].tolist() == list(range(N))
    assert iv["images_sha256"] == images_sha256(ids) and iv["bootstrap_sha256"] == content_sha256(dists, ids)
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, renamed
    without = bootstrap_intervals_field(ev, KEYS, resamples=60, level=0.9, seed=3)
    assert "side_file" not in without and without["bounds"] == iv["bounds"]


def test_paired_difference_equals_a_brute_force_loop():
    """Each resample's images fed to fresh evaluators of A and B; the metric recomputed from scratch."""
    items_a, items_b = seg_items(N, 0), seg_items(N, 11)
    ev_a, ev_b = seg_evaluator(items_a), seg_evaluator(items_b)
    resamples, seed = 40, 5
    da = ev_a.bootstrap_distribution(["mIoU"], resamples=resamples, seed=seed)["mIoU"]
    db = ev_b.bootstrap_distribution(["mIoU"], resamples=resamples, seed=seed)["mIoU"]
    diffs = []
    for row in resample_indices(N, resamples, seed):
        vals = []
        for items in (items_a, items_b):
            ev = build("seg")
            run_over(ev, [items[i] for i in row], list(range(N)), keyed=False)  # duplicates counted
            vals.append(ev.compute()["mIoU"])
        diffs.append(vals[0] - vals[1])
    np.testing.assert_allclose(da - db, diffs, rtol=1e-9, atol=1e-9)
    lo, hi = paired_difference(da, db, 0.95)
    ref_lo, ref_hi = np.percentile(diffs, [2.5, 97.5])
    assert lo == pytest.approx(ref_lo, abs=1e-9) and hi == pytest.approx(ref_hi, abs=1e-9)
    # the paired interval is narrower than the two marginal intervals side by side suggest
    assert hi - lo < (np.percentile(da, 97.5) - np.percentile(da, 2.5)) + (
        np.percentile(db, 97.5) - np.percentile(db, 2.5))


def test_identical_inputs_give_a_zero_width_interval_at_zero():
    d = np.random.default_rng(0).normal(40, 2, 500)
    d[3] = np.nan
    assert paired_difference(d, d.copy()) == (0.0, 0.0)
    with pytest.raises(ValueError, match="same resamples"):
        paired_difference(d, d[:-1])


# ----------------------------------------------------------------------------- records
def write_seg_record(root: Path, name: str, items, *, pid="test-paired-v1", resamples=50, seed=0,
                     indices=None, content="data-a", side=True) -> Path:
    ev = seg_evaluator(items, indices)
    path = root / name / pid / "seg" / "seed0.json"
    iv = bootstrap_intervals_field(ev, KEYS, resamples=resamples, level=0.95, seed=seed,
                                   side_path=side_path(path) if side else None)
    rec = make_record(model={"name": name}, task="seg",
                      dataset={"name": "toy", "split": "test", "content_hash": content},
                      protocol={"kind": "probe", "protocol_id": pid}, metrics=ev.compute(), intervals=iv,
                      config={"backbone": name}, seeds=[0])
    write_record(path, rec)
    return path


def test_paired_comparisons_from_records(tmp_path):
    write_seg_record(tmp_path, "good", seg_items(N, 11))
    write_seg_record(tmp_path, "good-random", seg_items(N, 0))
    (c,) = paired_comparisons(tmp_path, "good", "good-random")
    a, b = (read_record(tmp_path / m / "test-paired-v1" / "seg" / "seed0.json")
            for m in ("good", "good-random"))
    da, _ = read_side_file(tmp_path / "good" / "test-paired-v1" / "seg" / "seed0.bootstrap.npz")
    db, _ = read_side_file(tmp_path / "good-random" / "test-paired-v1" / "seg" / "seed0.bootstrap.npz")
    assert (c["task"], c["metric"], c["n"]) == ("seg", "mIoU", N)
    assert c["value_a"] == a["metrics"]["mIoU"]
    assert c["difference"] == a["metrics"]["mIoU"] - b["metrics"]["mIoU"]
    assert (c["low"], c["high"]) == paired_difference(da["mIoU"], db["mIoU"])
    assert c["low"] > 0 and c["winner"] == "a" and c["verdict"] == "good better beyond the 95% interval"
    (r,) = paired_comparisons(tmp_path, "good-random", "good")
    assert r["winner"] == "b" and (r["low"], r["high"]) == pytest.approx((-c["high"], -c["low"]))
    text = format_comparisons([c])
    assert text.splitlines()[0].startswith("paired comparisons (95% paired bootstrap")
    assert "good better" in text
    # the leaderboard's loaders read the records and skip the side files
    assert len(load_records([tmp_path])) == 2


def test_same_records_are_within_the_interval(tmp_path):
    write_seg_record(tmp_path, "x", seg_items(N, 0))
    write_seg_record(tmp_path, "y", seg_items(N, 0))
    (c,) = paired_comparisons(tmp_path, "x", "y")
    assert (c["low"], c["high"], c["difference"]) == (0.0, 0.0, 0.0)
    assert c["winner"] is None and c["verdict"] == "within the 95% interval"


@pytest.mark.parametrize("kw, what", [
    ({"pid": "test-paired-v2"}, "different protocol id"),
    ({"resamples": 40}, "different bootstrap resamples"),
    ({"seed": 1}, "different bootstrap seed"),
    ({"content": "data-b"}, "different dataset content"),
    ({"indices": [10, 11, 12, 13, 14, 15, 16]}, r"different test images \(images_sha256\)"),
])
def test_mismatched_records_are_refused(tmp_path, kw, what):
    a = write_seg_record(tmp_path, "a", seg_items(N, 0))
    b = write_seg_record(tmp_path, "b", seg_items(N, 11), **kw)
    with pytest.raises(ValueError, match=what) as e:
        paired_comparisons(tmp_path, "a", "b")
    if "protocol" not in what:  # the message names both records
        assert str(a) in str(e.value) and str(b) in str(e.value)


def test_different_n_is_refused(tmp_path):
    write_seg_record(tmp_path, "a", seg_items(N, 0))
    write_seg_record(tmp_path, "b", seg_items(N - 1, 11))
    with pytest.raises(ValueError, match=r"different n \(test images\) \(7 vs 6\)"):
        paired_comparisons(tmp_path, "a", "b")


def test_missing_or_foreign_side_file_is_refused(tmp_path):
    root = tmp_path / "r"
    write_seg_record(root, "a", seg_items(N, 0))
    b = write_seg_record(root, "b", seg_items(N, 11))
    side_path(b).unlink()
    with pytest.raises(ValueError, match=f"{side_path(b)}: missing bootstrap side file of {b}"):
        paired_comparisons(root, "a", "b")
    # another run's side file (same images, other values) under the record's name
    other = write_seg_record(tmp_path / "other", "b", seg_items(N, 12))
    side_path(b).write_bytes(side_path(other).read_bytes())
    with pytest.raises(ValueError, match="do not match intervals.bootstrap_sha256"):
        paired_comparisons(root, "a", "b")
    with pytest.raises(ValueError, match=f"two seg records of b .* seed 0: {b} and {other}|{other} and {b}"):
        paired_comparisons(tmp_path, "a", "b")  # both b records under one folder: which one is meant?
    write_seg_record(tmp_path / "old", "a", seg_items(N, 0))
    write_seg_record(tmp_path / "old", "b", seg_items(N, 11), side=False)
    with pytest.raises(ValueError, match="names no bootstrap side file"):
        paired_comparisons(tmp_path / "old", "a", "b")


def test_unknown_backbone_and_task_are_named(tmp_path):
    write_seg_record(tmp_path, "a", seg_items(N, 0))
    write_seg_record(tmp_path, "b", seg_items(N, 11))
    with pytest.raises(ValueError, match=r"backbone 'zz'.*backbones there: \['a', 'b'\]"):
        paired_comparisons(tmp_path, "a", "zz")
    with pytest.raises(ValueError, match="no pose probe record of 'a'"):
        paired_comparisons(tmp_path, "a", "b", tasks="pose")


# ----------------------------------------------------------------------------- probe and CLI
def test_comparisons_from_records_pick_the_common_protocol(tmp_path):
    write_seg_record(tmp_path, "a", seg_items(N, 0))
    write_seg_record(tmp_path, "b", seg_items(N, 11))
    write_seg_record(tmp_path, "a", seg_items(N, 0), pid="test-paired-v2")
    recs = load_records([tmp_path])
    (c,) = comparisons_from_records(recs, "a", "b")
    assert c["protocol_id"] == "test-paired-v1"
    write_seg_record(tmp_path, "b", seg_items(N, 11), pid="test-paired-v2")
    with pytest.raises(ValueError, match="several protocols"):
        comparisons_from_records(load_records([tmp_path]), "a", "b")
    assert comparisons_from_records(load_records([tmp_path]), "a", "b",
                                    protocol_id="test-paired-v2")[0]["protocol_id"] == "test-paired-v2"
    # each task has its own id: a {task: id} map, or several ids of which a task takes its own
    recs = load_records([tmp_path])
    assert comparisons_from_records(recs, "a", "b", protocol_id={"seg": "test-paired-v2"})[0][
        "protocol_id"] == "test-paired-v2"
    assert comparisons_from_records(recs, "a", "b", protocol_id="pose-id,test-paired-v1")[0][
        "protocol_id"] == "test-paired-v1"
    with pytest.raises(ValueError, match="share no task"):
        comparisons_from_records(recs, "a", "b", protocol_id="pose-id")
    with pytest.raises(ValueError, match="cannot pair a and b on seg"):
        comparisons_from_records(recs, "a", "b", tasks="seg", protocol_id={"pose": "pose-id"})


def test_run_compare_is_validated_before_any_work(tmp_path, capsys, monkeypatch):
    import benchmarks.mainjob as mainjob

    monkeypatch.setattr(mainjob, "run_probe", lambda *a, **k: pytest.fail("probing started"))
    code = main(["run", "--quick", "--out", str(tmp_path / "o"), "--backbones", "gt-oracle,pixels",
                 "--compare", "pixels:dinov2_small", "--no-mediapipe"])
    err = capsys.readouterr().err
    assert code == 1 and "--compare 'pixels:dinov2_small'" in err and "backbones: gt-oracle, pixels" in err
    assert not (tmp_path / "o").exists()


def test_report_shows_comparisons_escaped(tmp_path):
    from leaderboard.build import build_site

    write_seg_record(tmp_path / "r", "<b>good</b>", seg_items(N, 11))
    write_seg_record(tmp_path / "r", "base", seg_items(N, 0))
    comps = paired_comparisons(tmp_path / "r", "<b>good</b>", "base")
    paths = build_site([tmp_path / "r"], tmp_path / "site", with_figures=False, comparisons=comps)
    page = paths["html"].read_text(encoding="utf-8")
    assert 'id="comparisons"' in page and "&lt;b&gt;good&lt;/b&gt;" in page and "<b>good</b>" not in page
    assert comps[0]["display"]["difference"] in page
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "## Paired comparisons (95% paired bootstrap" in md and "<b>good</b>" not in md
    with pytest.raises(ValueError, match=r"comparisons\[0\]: missing \['display'\]"):
        build_site([tmp_path / "r"], tmp_path / "s2", with_figures=False,
                   comparisons=[{k: v for k, v in comps[0].items() if k != "display"}])


def test_pose_image_ids_are_the_resampled_images():
    """Pose resamples images (several instances may share one), in ascending image-id order."""
    from evaluators.pose.evaluator import PoseEvaluator
    from tests.evaluators.pose.test_evaluator import META, _update, make_samples

    s = make_samples(30, seed=5)
    ev = PoseEvaluator(meta=META)
    _update(ev, s, np.arange(30))
    ids = ev.bootstrap_image_ids()
    assert ids.tolist() == sorted(set(np.asarray(s["image_ids"]).tolist()))
    assert len(ids) == ev.num_images < 30  # some samples share an image
    iv = bootstrap_intervals_field(ev, ["AP"], resamples=20, level=0.95, seed=1)
    assert iv["images_sha256"] == images_sha256(ids) and iv["n"] == len(ids)


def test_schema_checks_the_new_interval_fields():
    from sapiens2.records.schema import validate

    ev = seg_evaluator(seg_items(N, 0))
    iv = bootstrap_intervals_field(ev, KEYS, resamples=10, level=0.95, seed=0)
    base = dict(model={"name": "m"}, task="seg",
                dataset={"name": "toy", "split": "test", "content_hash": "c"},
                protocol={"kind": "probe", "protocol_id": "test-paired-v1"}, metrics=ev.compute(),
                config={}, seeds=[0])
    ok = make_record(**base, intervals={**iv, "side_file": "seed0.bootstrap.npz",
                                        "bootstrap_sha256": "0" * 64})
    assert validate(ok) == []
    from sapiens2.records.results import RecordError

    for bad, why in (({"side_file": "../x.npz", "bootstrap_sha256": "0" * 64}, "side_file"),
                     ({"side_file": "seed0.bootstrap.npz"}, "bootstrap_sha256"),
                     ({"images_sha256": "xyz"}, "images_sha256")):
        with pytest.raises(RecordError, match=why):
            make_record(**base, intervals={**iv, **bad})


@pytest.mark.slow
def test_run_and_compare_cli_pair_the_probes_records(tmp_path, capsys, monkeypatch):
    """``run --compare`` end to end on the toy split (the data folder is swapped for in-memory data):
    side files beside the records, the table printed, ``comparisons.json`` and the report section;
    then ``compare`` reads the same records."""
    import benchmarks.mainjob as mainjob

    real = mainjob.run_probe
    data = make_toy_data(tasks=("seg",), seed=0)
    monkeypatch.setattr(mainjob, "default_data_dir", lambda protocol, quick=False, generator=None: "toy")
    # patched where the main job looks it up (its module's own name)
    monkeypatch.setattr(mainjob, "run_probe",
                        lambda name, tasks, _data, out, **kw: real(name, tasks, data, out, **kw))
    out = tmp_path / "o"
    assert main(["run", "--quick", "--out", str(out), "--backbones", "gt-oracle,pixels", "--tasks", "seg",
                 "--seeds", "0,1", "--compare", "gt-oracle:pixels", "--no-mediapipe", "--no-paper"]) == 0
    text = capsys.readouterr().out
    assert "paired comparisons (95% paired bootstrap of the difference, same test images)" in text
    (ora,) = (out / "results" / "gt-oracle").glob("*/seg/seed0.json")
    pix = [ora.parents[3] / "pixels" / ora.parts[-3] / "seg" / f
           for f in ("seed0.json", "seed1.json", "mean.json")]
    rec = read_record(ora)
    assert side_path(ora).is_file() and rec["intervals"]["side_file"] == "seed0.bootstrap.npz"
    mean = read_record(pix[2])
    seeds_agree = read_record(pix[0])["metrics"] == read_record(pix[1])["metrics"]
    # the mean over seeds points to the first seed's side file only when the seeds agree
    assert ("side_file" in mean["intervals"]) == (mean["intervals"]["method"] == "bootstrap") == seeds_agree
    saved = json.loads((out / "comparisons.json").read_text())
    (c,) = saved["comparisons"]
    assert (c["a"], c["b"], c["task"], saved["skipped"]) == ("gt-oracle", "pixels", "seg", [])
    assert c["record_a"] == str(ora) and c["record_b"] == str(pix[0]) and c["n"] == rec["intervals"]["n"]
    assert c == paired_comparisons(out / "results", "gt-oracle", "pixels")[0]
    assert c["verdict"] in text and 'id="comparisons"' in (out / "site" / "index.html").read_text()
    out_json = tmp_path / "cmp.json"
    assert main(["compare", str(out / "results"), "gt-oracle", "pixels", "--json", str(out_json)]) == 0
    assert format_comparisons([c]) in capsys.readouterr().out
    assert json.loads(out_json.read_text())["comparisons"] == [c]
    assert main(["compare", str(out / "results"), "gt-oracle", "nope"]) == 1
    assert "backbone 'nope'" in capsys.readouterr().err
    site = tmp_path / "site"
    assert main(["leaderboard", "build", str(out / "results"), "--out", str(site), "--no-figures",
                 "--comparisons", str(out_json)]) == 0
    assert c["display"]["difference"] in (site / "index.html").read_text()
    out_json.write_text("[]")
    assert main(["leaderboard", "build", str(out / "results"), "--out", str(site), "--comparisons",
                 str(out_json)]) == 1
    assert "expected a JSON object with a 'comparisons' list" in capsys.readouterr().err


def test_verdict_follows_the_metric_direction():
    from benchmarks.probe.records.compare import _verdict
    from benchmarks.probe.records.headline import PROBE_HEADLINE

    epe, miou = PROBE_HEADLINE["pose"], PROBE_HEADLINE["seg"]  # lower / higher is better
    assert _verdict(epe, -3.0, -1.0, "p", "r", 0.95) == ("a", "p better beyond the 95% interval")
    assert _verdict(epe, 1.0, 3.0, "p", "r", 0.95) == ("b", "r better beyond the 95% interval")
    assert _verdict(miou, -3.0, -1.0, "p", "r", 0.9) == ("b", "r better beyond the 90% interval")
    assert _verdict(miou, -1.0, 3.0, "p", "r", 0.95) == (None, "within the 95% interval")
    assert _verdict(miou, float("nan"), float("nan"), "p", "r", 0.95)[0] is None
