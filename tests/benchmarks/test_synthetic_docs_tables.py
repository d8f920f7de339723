"""The generated tables of docs/synthetic_data.md (benchmarks/synthetic_docs_tables.py)."""

from __future__ import annotations

from benchmarks import synthetic_docs_tables as T
from benchmarks.results import write_measurement


def _row(condition, label, body_ap, render):
    groups = {g: {"people": 2, "missed": 1, "body_AP": 0.5} for g in ("cut", "lying", "hidden", "clear")}
    return {"condition": condition, "label": label, "size": "256x192", "render": render,
            "n_images": 4, "n_people": 8, "missed_people": 4, "body_AP": body_ap,
            "body_AP_95": [body_ap - 0.1, body_ap + 0.05], "PCK@0.1": 0.75, "images_nobody_found": 1,
            "pose_mask_person_IoU": 0.7, "selfie_mask_person_IoU": 0.8, "by_group": groups,
            "detections_of_another_person": {"detected": 4, "wrong_person": 3}}


def test_the_realism_table_shows_every_condition_with_its_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "ROOT", tmp_path)
    path_render = {"mode": "path", "spp": 16, "max_people": 2}
    rows = [_row("default@16", "realistic, default scenes: every pose", 0.6789, path_render),
            _row("procedural", "procedural generator (its own people)", 0.2, None)]
    paired = [{"condition": "default@16", "size": "256x192", "reference": "default", "difference": -0.0537,
               "difference_95": [-0.09, -0.02], "n_images": 4}]
    write_measurement(tmp_path / "m.json", "test", {"conditions": rows, "paired_with_first": paired})
    table = T.realism_table("m.json")
    assert ("| `default@16` | every pose | 256x192 | path, 16 spp | 4 | 8 | 0.679 [0.579, 0.729] | "
            "0.750 | 4 | 3 of 4 | 1 of 4 | 0.700 | 0.800 |") in table
    assert ("| `procedural` | procedural generator (its own people) | 256x192 | procedural ray caster | "
            "4 | 8 | 0.200 [0.100, 0.250] |") in table
    assert table.count("1 of 2 missed, AP 0.500") == 8
    assert "| `default@16` 256x192 | 1 of 2 missed" in table
    assert "| `default@16` | 256x192 | -0.054 [-0.090, -0.020] | 4 |" in table
