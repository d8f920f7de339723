"""Result records: schema, validation on write and read, provenance, bad input."""

from __future__ import annotations

import json
import math

import pytest

from sapiens2.records.results import (
    RecordError,
    dataset_content_hash,
    flatten_metrics,
    load_records,
    make_record,
    read_record,
    write_record,
)
from sapiens2.records.schema import SCHEMA_ID, SCHEMA_VERSION, config_hash, validate

DATASET = {"name": "synth", "split": "test", "content_hash": "0" * 64, "num_samples": 8}


def _record(**kw):
    args = dict(model={"name": "sapiens2_0.1b", "params": 114_000_000}, task="seg", dataset=DATASET,
                protocol={"kind": "probe", "protocol_id": "p-abc"}, metrics={"mIoU": 40.5, "mAcc": 55.0},
                config={"lr": 1e-3, "layers": [3, 7, 11]}, seeds=[0], timings={"train_s": 1.5})
    args.update(kw)
    return make_record(**args)


def test_make_record_fills_provenance_and_validates():
    rec = _record(conventions={"nan_to_num": None})
    assert rec["schema"] == SCHEMA_ID and rec["schema_version"] == SCHEMA_VERSION
    assert validate(rec) == []
    prov = rec["provenance"]
    import torch

    assert prov["torch_version"] == torch.__version__
    assert prov["package"] == "sapiens2-bench" and prov["python"]
    assert rec["config_hash"] == config_hash(rec["config"])
    assert rec["device"]["type"] == "cpu" and rec["device"]["num_threads"] >= 1
    assert rec["run_id"] != _record()["run_id"]


def test_write_read_round_trip(tmp_path):
    rec = _record()
    path = write_record(tmp_path / "sub" / "r.json", rec)
    assert read_record(path) == rec
    assert [p.name for p in tmp_path.joinpath("sub").iterdir()] == ["r.json"]  # no temp file left


def test_non_finite_metrics_become_null():
    rec = _record(metrics={"mIoU": float("nan"), "mAcc": float("inf"), "aAcc": 91.0})
    assert rec["metrics"] == {"mIoU": None, "mAcc": None, "aAcc": 91.0}


def test_flatten_official_evaluator_layouts():
    pose = {"wholebody": {"AP": 0.5, "AR": 0.6}, "body": {"AP": 0.7}, "conventions": {"oks_nms": 0.9}}
    flat, bd = flatten_metrics(pose)
    assert flat == {"wholebody/AP": 0.5, "wholebody/AR": 0.6, "body/AP": 0.7} and bd == {}
    seg = {"summary": {"mIoU": 80.0, "aAcc": 95.0}, "per_class": {"IoU": [0.9, float("nan")]}, "aAcc": 95.0}
    flat, bd = flatten_metrics(seg)
    assert flat == {"mIoU": 80.0, "aAcc": 95.0}
    assert bd == {"IoU per class": {"0": 0.9, "1": None}}
    rec = _record(metrics={**pose})
    assert rec["conventions"] == {"oks_nms": 0.9}


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda r: r.pop("task"), "missing required field 'task'"),
        (lambda r: r.__setitem__("task", "depth"), "'depth' is not one of"),
        (lambda r: r["metrics"].__setitem__("mIoU", "high"), "record.metrics.mIoU: expected number or null"),
        (lambda r: r["protocol"].pop("protocol_id"), "needs its protocol_id"),
        (lambda r: r["config"].__setitem__("lr", 1.0), "does not match the SHA-256"),
        (lambda r: r.__setitem__("schema_version", 99), "unsupported schema_version 99"),
        (lambda r: r.__setitem__("extra", 1), "unexpected field 'extra'"),
        (lambda r: r.__setitem__("metrics", {}), "no metric values"),
        (lambda r: r.__setitem__("seeds", [1, 1]), "repeated seed"),
        (lambda r: r["timings"].__setitem__("train_s", -1.0), "< minimum 0"),
    ],
)
def test_invalid_records_rejected_on_write_and_read(tmp_path, mutate, reason):
    rec = _record()
    mutate(rec)
    path = tmp_path / "bad.json"
    with pytest.raises(RecordError) as e:
        write_record(path, rec)
    assert reason in str(e.value) and str(path) in str(e.value)
    assert not path.exists()
    path.write_text(json.dumps(rec))
    with pytest.raises(RecordError) as e:
        read_record(path)
    assert reason in str(e.value) and str(path) in str(e.value)


def test_make_record_rejects_bad_arguments():
    with pytest.raises(RecordError, match="protocol_id"):
        _record(protocol={"kind": "probe"})
    with pytest.raises(RecordError, match="'train' is not one of"):
        _record(protocol={"kind": "train"})
    with pytest.raises(ValueError, match="a list is not a metric value"):
        _record(metrics={"mIoU": [1, 2]})
    with pytest.raises(ValueError, match=r"metrics\['mIoU'\]: expected a number, got str"):
        _record(metrics={"mIoU": "high"})


def test_foreign_and_malformed_files(tmp_path):
    lm_eval = tmp_path / "results_2024.json"
    lm_eval.write_text(json.dumps({"results": {"hellaswag": {"acc": 0.5}}, "config": {}}))
    with pytest.raises(RecordError, match="not a sapiens2-bench result") as e:
        read_record(lm_eval)
    assert str(lm_eval) in str(e.value)
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": ')
    with pytest.raises(RecordError, match="malformed JSON") as e:
        read_record(broken)
    assert str(broken) in str(e.value)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        read_record(tmp_path / "missing.json")
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    with pytest.raises(RecordError, match="expected a JSON object"):
        read_record(not_object)


def test_load_records_folder_skips_foreign_but_not_broken_ours(tmp_path):
    write_record(tmp_path / "a.json", _record())
    (tmp_path / "state.json").write_text(json.dumps({"step": 3}))
    recs = load_records([tmp_path], skip_foreign=True)
    assert len(recs) == 1 and recs[0]["_path"].endswith("a.json")
    with pytest.raises(RecordError, match="state.json"):
        load_records([tmp_path])
    with pytest.raises(RecordError, match="state.json"):  # named explicitly: always an error
        load_records([tmp_path / "state.json"], skip_foreign=True)
    ours_broken = _record()
    ours_broken["metrics"]["mIoU"] = "x"
    (tmp_path / "b.json").write_text(json.dumps(ours_broken))
    with pytest.raises(RecordError, match="b.json"):
        load_records([tmp_path], skip_foreign=True)


def test_dataset_content_hash_tracks_content(tmp_path):
    (tmp_path / "a.txt").write_text("1")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_text("2")
    h1 = dataset_content_hash(tmp_path)
    assert h1 == dataset_content_hash(tmp_path) and len(h1) == 64
    (tmp_path / "d" / "b.txt").write_text("3")
    assert dataset_content_hash(tmp_path) != h1
    with pytest.raises(FileNotFoundError):
        dataset_content_hash(tmp_path / "nope")


def test_aggregate_record_needs_seeds():
    rec = _record(seeds=[0, 1, 2], metrics_std={"mIoU": 1.0})
    assert rec["metrics_std"] == {"mIoU": 1.0}
    with pytest.raises(RecordError, match="single-seed"):
        _record(seeds=[0], metrics_std={"mIoU": 1.0})
    assert math.isfinite(rec["metrics"]["mIoU"])
