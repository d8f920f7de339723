"""What wins and how sure: shared ranks from intervals (and paired verdicts), the floor-to-oracle gap
closed, small-n flags, reasons for all-zero columns and [0, 0] intervals, reference systems unranked,
the paired verdict table and the terminal table's fixed places, on hand-computable records."""

from __future__ import annotations

import pytest

from benchmarks.probe.records.summary import summary_table
from leaderboard.comparisons import comparisons_view, folded_comparisons
from leaderboard.protocols import protocol_infos
from leaderboard.report_view import table_view
from leaderboard.results import make_record
from leaderboard.standing import gap_closed, rank_text, ranks
from leaderboard.summary_view import summary_views
from leaderboard.tables import group_tables, records_to_frame
from sapiens2.records.integrity import protocol_id

PID = protocol_id("probe", 5, {"version": 5})
SEG = "seg: mIoU % ↑"


def _rec(name, task, metrics, bounds=None, n=96, weights="random(seed=0)", backbone=None, kind="probe",
         pid=PID, config=None):
    iv = None if bounds is None else {"level": 0.95, "method": "bootstrap", "resamples": 100, "seed": 0,
                                      "n": n, "bounds": bounds}
    return make_record(model={"name": name, "params": None, "weights": weights,
                              **({"backbone": backbone} if backbone else {})},
                       task=task, dataset={"name": "synth", "split": "test", "content_hash": None,
                                           "num_samples": n},
                       protocol={"kind": kind, "protocol_id": pid}, metrics=metrics,
                       config=config if config is not None else {"protocol": {"version": 5}}, seeds=[0],
                       intervals=iv)


def _seg(name, v, half=0.1, **kw):
    return _rec(name, "seg", {"mIoU": v}, {"mIoU": [v - half, v + half]}, **kw)


FLOOR = dict(weights="none", backbone="FeatureFreeFloor")
ORACLE = dict(weights="none", backbone="GroundTruthOracle")


def _summary(recs, verdicts=None):
    views = summary_views(records_to_frame(recs), protocol_infos(recs, {PID: "probe v5"}), verdicts)
    return views


def _cells(tv, model):
    row = next(r for r in tv.rows + tv.ceiling if r.model.startswith(model))
    return {c.label: cell for c, cell in zip(tv.columns, row.cells)}


def test_ranks_are_shared_where_intervals_overlap_and_paired_verdicts_decide_their_pair():
    # 5.91 and 5.90 overlap (seg today): one shared rank; 3.0 is beyond both
    assert ranks([5.91, 5.90, 3.0], [5.8, 5.8, 2.9], [6.0, 6.0, 3.1], True) == [1, 1, 3]
    # lower is better; a chain: A beats C, B overlaps both -> A 1, B 1, C 2
    assert ranks([10, 11.8, 13], [9.5, 11.0, 12.5], [11.0, 12.6, 13.5], False) == [1, 1, 2]
    # no interval: the point value is the interval (distinct values separate)
    assert ranks([2.0, 1.0, None], [None, None, None], [None, None, None], True) == [1, 2, None]
    # a paired verdict separates two rows whose marginal intervals overlap, and can merge them too
    assert ranks([5.91, 5.90], [5.8, 5.8], [6.0, 6.0], True, paired={(0, 1): 0}) == [1, 2]
    assert ranks([9.0, 1.0], [8.9, 0.9], [9.1, 1.1], True, paired={(1, 0): None}) == [1, 1]
    assert rank_text([1, 1, 3, None]) == ["=1", "=1", "3", "-"]


def test_summary_gap_closed_ranks_and_fixed_reference_places():
    recs = [_seg("b", 30.0, half=1.0), _seg("floor", 20.0, **FLOOR), _seg("a", 31.0, half=1.5),
            _seg("c", 50.0), _seg("gt-oracle", 60.0, **ORACLE)]
    (tv,) = _summary(recs)
    assert [c.label for c in tv.columns] == ["model", "kind", SEG, "seg: gap closed"]
    assert [r.model for r in tv.ceiling] == ["gt-oracle", "floor"]  # ceiling first, floor second
    gap = {r.model.split(" ")[0]: r.cells[3].text for r in tv.rows + tv.ceiling}
    # (30 - 20) / (60 - 20) = 25%, (31 - 20) / 40 = 27.5%, (50 - 20) / 40 = 75%
    assert gap == {"a": "27.5%", "b": "25.0%", "c": "75.0%", "floor": "0%", "gt-oracle": "100%"}
    assert gap_closed(30.0, 20.0, 60.0) == pytest.approx(0.25)
    sub = {r.model.split(" ")[0]: r.cells[2].sub for r in tv.rows}
    assert sub == {"c": "rank 1 · n=96", "a": "rank =2 · n=96", "b": "rank =2 · n=96"}
    best = [r.model.split(" ")[0] for r in tv.rows if "best" in r.cells[2].cls]
    assert best == ["c"]
    assert all("best" not in c.cls and "rank" not in c.sub for r in tv.ceiling for c in r.cells)


def test_small_n_is_flagged_in_every_table():
    recs = [_seg("a", 30.0, n=8), _seg("b", 20.0, n=8)]
    (tv,) = _summary(recs)
    assert "n=8 small" in _cells(tv, "a")[SEG].sub and "small" in _cells(tv, "a")[SEG].cls
    assert any(n.startswith("small n: fewer than 30 test samples (n = 8)") for n in tv.notes)
    (t,) = group_tables(records_to_frame(recs))
    task = table_view(t, protocol_infos(recs)[t.protocol_key])
    assert _cells(task, "a")["n"].text == "8 (small n)"
    assert any(n.startswith("small n:") for n in task.notes)
    comp = {"task": "seg", "a": "a", "b": "b", "n": 8, "verdict": "within the 95% interval", "level": 0.95,
            "display": {"metric": "mIoU %", "value_a": "30", "value_b": "20", "difference": "10 [-1, 20]"}}
    view = comparisons_view([comp])
    assert view["rows"][0]["n"] == "8 (small n)" and any(n.startswith("small n:") for n in view["notes"])
    # a run of 96 images is not flagged
    (big,) = _summary([_seg("a", 30.0), _seg("b", 20.0)])
    assert not any(n.startswith("small n") for n in big.notes)


def test_a_column_of_zeros_and_a_zero_interval_say_why():
    pose = [_rec(m, "pose", {"EPE": e, "AP": 0.0}, {"EPE": [e - 5, e + 5], "AP": [0.0, 0.0]}, n=140)
            for m, e in (("a", 80.0), ("b", 82.0))]
    (tv,) = _summary(pose)
    (note,) = [n for n in tv.notes if "is 0 for every" in n]
    assert note.startswith("pose: AP % is 0 for every one of the 2 measured row(s) (n = 140 test samples)")
    assert "object keypoint similarity" in note  # the declared reason of the metric
    assert _cells(tv, "a")["pose: EPE px ↓"].sub == "rank =1 · n=140"  # 80 [75, 85] vs 82 [77, 87]
    (t,) = group_tables(records_to_frame(pose))
    assert any("AP % is 0 for every" in n for n in t.notes)
    # one row at [0, 0] among others: the interval gets its own note
    seg = [_seg("a", 0.0, half=0.0), _seg("b", 4.0)]
    (tv,) = _summary(seg)
    why = f"{SEG[:-2]}: the interval of a (random init) is exactly [0, 0]"
    assert any(n.startswith(why) for n in tv.notes)


def test_a_reference_system_is_never_ranked():
    mp = _rec("mediapipe-selfie", "seg", {"mIoU": 85.0}, weights="selfie.tflite", kind="eval",
              pid="person-vs-background-v1", config={"system": "mediapipe"})
    probe = [_seg("a", 30.0), _seg("b", 20.0)]
    views = _summary(probe + [mp])
    reference = views[-1]
    cell = _cells(reference, "mediapipe")[SEG]
    assert "rank" not in cell.sub and "best" not in cell.cls
    assert any("never ranked" in n for n in reference.notes)
    (t,) = [t for t in group_tables(records_to_frame([mp]))]
    assert t.rows["rank"].isna().all()
    assert table_view(t, protocol_infos([mp])[t.protocol_key]).rows[0].cells[3].text == "-"


def _comparison(a, b, winner, diff=1.0, low=0.5, high=1.5):
    return {"task": "seg", "a": a, "b": b, "n": 96, "level": 0.95, "protocol_id": PID, "winner": winner,
            "verdict": f"{a} better beyond the 95% interval" if winner else "within the 95% interval",
            "difference": diff, "low": low, "high": high,
            "display": {"metric": "mIoU %", "value_a": "x", "value_b": "y", "difference": f"{diff}"}}


def test_paired_verdicts_fold_into_ranks_and_the_verdict_table():
    recs = [_seg("m", 5.91, weights="m.safetensors"), _seg("m-random", 5.90), _seg("floor", 5.0, **FLOOR),
            _seg("gt-oracle", 60.0, **ORACLE)]
    comps = [_comparison("m", "m-random", "a"), _comparison("m", "floor", "a"),
             _comparison("m-random", "floor", None, 0.0, 0.0, 0.0)]
    names = {("seg", PID, "m-random"): "m-random (random init)"}
    folded = folded_comparisons(comps, names)
    assert [v["zero"] for v in folded] == [False, False, True]
    (plain,) = _summary(recs)
    assert _cells(plain, "m")[SEG].sub.startswith("rank =1")  # overlapping intervals: shared
    (tv,) = _summary(recs, folded)
    assert _cells(tv, "m")[SEG].sub.startswith("rank 1")
    assert _cells(tv, "m-random")[SEG].sub.startswith("rank 2")
    verdicts = tv.verdicts
    assert [c.label for c in verdicts.columns] == ["model", "seg"]
    cells = {r.model: (r.cells[1].text, r.cells[1].ci) for r in verdicts.rows}
    assert cells == {"m": ("▲ twin", "▲ floor"), "m-random (random init)": ("= floor (identical)", "")}
    assert any("identical on every test image" in n for n in verdicts.notes)
    view = comparisons_view(comps)
    assert view["rows"][2]["verdict"].endswith("(identical predictions: see the note)")


def test_terminal_table_puts_the_ceiling_first_and_the_floor_second():
    recs = [_seg("zeta", 30.0), _seg("floor", 20.0, **FLOOR), _seg("alpha", 40.0),
            _seg("gt-oracle", 60.0, **ORACLE)]
    lines = summary_table(recs, ["seg"]).splitlines()
    assert [ln.split()[0] for ln in lines[1:5]] == ["gt-oracle", "floor", "zeta", "alpha"]
    assert lines[0].split() == ["backbone", "seg", "mIoU", "%", "↑", "gap"]
    assert lines[3].split()[-1] == "25.0%" and lines[4].split()[-1] == "50.0%"
    assert "n (test images): seg 96" in lines
    small = summary_table([_seg("a", 3.0, n=4)], ["seg"])
    assert "SMALL n (4 < 30 test images)" in small and "gap" not in small
    pose = summary_table([_rec("a", "pose", {"EPE": 80.0}, {"EPE": [75.0, 85.0]})], ["pose"])
    assert "pose EPE px ↓" in pose and "pixels of the 1024x768 top-down crop" in pose


def test_task_tables_rank_with_the_paired_verdicts_and_give_the_floor_its_zero_gap():
    recs = [_seg("m", 5.91, weights="m.safetensors"), _seg("m-random", 5.90), _seg("floor", 5.0, **FLOOR),
            _seg("gt-oracle", 60.0, **ORACLE)]
    names = {("seg", PID, "m-random"): "m-random (random init)"}
    folded = folded_comparisons([_comparison("m", "m-random", "a")], names)
    (t,) = group_tables(records_to_frame(recs), verdicts=folded)
    rank = dict(zip(t.rows["model"], t.rows["rank"]))
    assert rank["m"] == 1 and rank["m-random (random init)"] == 2  # the summary's ranks exactly
    gap = dict(zip(t.rows["model"], t.rows["gap"]))
    assert gap["floor"] == 0.0 and gap["gt-oracle"] == 1.0 and gap["m"] == pytest.approx(0.91 / 55)
    (plain,) = group_tables(records_to_frame(recs))
    assert list(plain.rows.loc[plain.rows["model"].str.startswith("m"), "rank"]) == [1, 1]
    # several all-zero columns: one note naming them all
    pose = [_rec(m, "pose", {"EPE": e, "AP": 0.0, "AR": 0.0}, {"EPE": [e - 5, e + 5]}, n=140)
            for m, e in (("a", 80.0), ("b", 82.0))]
    (t,) = group_tables(records_to_frame(pose))
    (note,) = [n for n in t.notes if "0 for every" in n]
    assert note.startswith("AP % and AR % are 0 for every one of the 2 measured row(s)")
