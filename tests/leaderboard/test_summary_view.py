"""The report's summaries: one per protocol (and label set), references apart, the random-init-first note.

Built from real records (``make_record``) through the same frames the site uses; the browser test
checks the same on the rendered page at 1400x900 and 390x844.
"""

from __future__ import annotations

from leaderboard.protocols import protocol_infos
from leaderboard.report_view import seeds_text, table_view
from leaderboard.summary_view import summary_views
from leaderboard.tables import group_tables, records_to_frame
from sapiens2.records.integrity import protocol_id
from sapiens2.records.results import make_record


def _pid(variant: str) -> str:
    return protocol_id("probe", 5, {"version": 5, "variant": variant})


A, B, C = _pid("a"), _pid("b"), _pid("c")


def _rec(name, task, metrics, weights="random(seed=0)", pid=A, backbone=None, kind="probe", config=None,
         seeds=(0,)):
    if config is None:
        config = {"protocol": {"version": 5, "variant": {A: "a", B: "b", C: "c"}[pid]}}
    return make_record(model={"name": name, "params": 1_000_000, "weights": weights,
                              **({"backbone": backbone} if backbone else {})},
                       task=task, dataset={"name": "synth", "split": "test", "content_hash": None,
                                           "num_samples": 8},
                       protocol={"kind": kind, "protocol_id": pid}, metrics=metrics, config=config,
                       seeds=list(seeds))


def _views(recs, names=None):
    long = records_to_frame(recs)
    return summary_views(long, protocol_infos(recs, names)), long


def _cells(tv, model):
    row = next(r for r in tv.rows + tv.ceiling if r.model.startswith(model))
    return {c.label: cell for c, cell in zip(tv.columns, row.cells)}


def test_reference_system_label_set_has_its_own_table_and_references_stay_apart():
    recs = [_rec("floor", "seg", {"mIoU": 9.0}, weights="none", backbone="FeatureFreeFloor"),
            _rec("dinov2_small", "seg", {"mIoU": 5.0}),
            _rec("sapiens2_0.1b", "seg", {"mIoU": 4.0}, weights="sapiens2_0.1b.safetensors"),
            _rec("sapiens2_0.1b", "normal", {"normal_mae": 30.0}, weights="sapiens2_0.1b.safetensors",
                 pid=B),
            _rec("mediapipe-selfie", "seg", {"mIoU": 85.0}, weights="selfie.tflite", kind="eval",
                 pid="person-vs-background-v1", config={"system": "mediapipe"})]
    views, _ = _views(recs, {A: "probe v5", B: "probe v5"})
    assert [v.title for v in views] == ["Summary — probe v5", "Summary — eval person-vs-background-v1"]
    probe, reference = views
    # the two per-task probe ids of one named protocol share a table; the 2-class mIoU never joins it
    assert [c.label for c in probe.columns] == ["model", "kind", "seg: mIoU % ↑", "normal: mean deg ↓"]
    assert [c.label for c in reference.columns] == ["model", "kind", "seg: mIoU % ↑"]
    assert all(not r.model.startswith("mediapipe") for r in probe.rows + probe.ceiling)
    assert any(f"seg {A}" in n and f"normal {B}" in n for n in probe.notes)
    # the floor is best on seg but a reference row: apart and never bolded; the best measured row is
    assert [r.model for r in probe.ceiling] == ["floor"]
    assert "best" not in _cells(probe, "floor")["seg: mIoU % ↑"].cls
    assert "best" in _cells(probe, "dinov2_small")["seg: mIoU % ↑"].cls
    # ... a random init: the note says why that can happen, with the measurement
    (note,) = [n for n in probe.notes if "random-init row ranks first" in n]
    assert "(seg)" in note and "4x384 channels on 19x14 tokens" in note and "4x192 channels" in note
    assert not any("random-init" in n for n in reference.notes)


def test_one_name_two_protocols_of_one_task_never_share_a_column():
    recs = [_rec("a", "seg", {"mIoU": 5.0}, pid=A),
            _rec("b", "seg", {"mIoU": 6.0}, pid=C)]
    views, _ = _views(recs, {A: "probe v5", C: "probe v5"})
    titles = sorted(v.title for v in views)
    assert titles == sorted([f"Summary — probe v5 [{A}]", f"Summary — probe v5 [{C}]"])
    assert all(len(v.rows) == 1 for v in views)


def test_task_table_notes_a_random_init_first_and_spells_out_seeds():
    recs = [_rec("dinov2_small", "seg", {"mIoU": 5.0}, seeds=(0,)),
            _rec("sapiens2_0.1b", "seg", {"mIoU": 4.0}, weights="w.safetensors")]
    long = records_to_frame(recs)
    (t,) = group_tables(long)
    tv = table_view(t, protocol_infos(recs)[t.protocol_key])
    assert any("random-init row ranks first" in n for n in tv.notes)
    assert _cells(tv, "dinov2_small")["seeds"].text == "1 seed: 0"
    assert seeds_text("0,1,2") == "3 seeds: 0, 1, 2"
    pretrained_first = [_rec("dinov2_small", "seg", {"mIoU": 3.0}), recs[1]]
    (t,) = group_tables(records_to_frame(pretrained_first))
    notes = table_view(t, protocol_infos(pretrained_first)[t.protocol_key]).notes
    assert not any("random-init" in n for n in notes)
