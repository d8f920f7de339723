"""The pose probe decodes with the bounded UDP refinement, and its protocol (so its id) names the rule."""

from __future__ import annotations

import pytest
import torch

from benchmarks.probe.protocol import ProbeProtocol, body_protocol, default_protocol, quick_protocol
from benchmarks.probe.tasks import build_task
from sapiens2.codecs.udp import udp_decode


def _faint_map(h: int, w: int) -> torch.Tensor:
    """A faint spike beside a fainter bump (a read-out's map of a keypoint it does not find): the
    official step from this argmax lands thousands of heatmap pixels away."""
    xs, ys = torch.arange(w, dtype=torch.float64)[None], torch.arange(h, dtype=torch.float64)[:, None]
    cx, cy, s = 12 + 2.439340791775935, 16.0, 2.7107182895852926
    hm = 0.00068071580438879 * torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * s * s))
    hm[16, 12] = 0.0014210508514542384
    return hm.float()


@pytest.mark.parametrize("make", [default_protocol, quick_protocol, body_protocol])
def test_the_pose_protocol_records_the_bounded_rule(make):
    p = make()
    assert p.task("pose").refine == "bounded"
    assert p.task_protocol("pose")["tasks"]["pose"]["refine"] == "bounded"  # what records store
    official = p.replace(tasks={"pose": {"refine": "official"}})
    assert official.task_protocol("pose")["tasks"]["pose"]["refine"] == "official"
    assert official.protocol_id("pose") != p.protocol_id("pose")
    assert {t: official.protocol_id(t) for t in p.tasks if t != "pose"} == {
        t: p.protocol_id(t) for t in p.tasks if t != "pose"}
    assert ProbeProtocol.from_dict(official.to_dict()).protocol_id("pose") == official.protocol_id("pose")


def test_the_pose_protocol_id_covers_the_rule_field():
    """The field entered the id: the view without it (the protocol before the rule) hashes elsewhere."""
    from sapiens2.records.integrity import protocol_id

    p = default_protocol()
    view = p.task_protocol("pose")
    before = {**view, "tasks": {"pose": {k: v for k, v in view["tasks"]["pose"].items() if k != "refine"}}}
    assert protocol_id("probe", p.version, view) == p.protocol_id("pose")
    assert protocol_id("probe", p.version, before) != p.protocol_id("pose")


def test_the_pose_task_decodes_with_the_protocol_rule():
    p = default_protocol()
    h, w = p.input_size
    hh, hw = h // 4, w // 4
    maps = torch.zeros(1, 2, hh, hw)
    maps[0, 0] = _faint_map(hh, hw)
    maps[0, 1, 20, 30] = 1.0  # a one-pixel peak: a well-formed map, both rules agree
    bounded, _ = build_task("pose", p).decode(maps)
    official, _ = build_task("pose", p.replace(tasks={"pose": {"refine": "official"}})).decode(maps)
    ref, _ = udp_decode(maps, input_size=(w, h), heatmap_size=(hw, hh), refine="official")
    torch.testing.assert_close(official, ref, rtol=0, atol=0)
    scale = torch.tensor([w / (hw - 1), h / (hh - 1)], dtype=torch.float64)
    argmax = (torch.tensor([12.0, 16.0], dtype=torch.float64) * scale).float()
    torch.testing.assert_close(bounded[0, 0], argmax, rtol=0, atol=0)
    assert float((official[0, 0] - argmax).abs().max()) > 10 * max(w, h)  # far outside the crop
    torch.testing.assert_close(bounded[0, 1], official[0, 1], rtol=0, atol=0)


def test_an_unknown_rule_is_an_error_naming_the_setting():
    with pytest.raises(ValueError, match=r"protocol.tasks\['pose'\].refine"):
        default_protocol().replace(tasks={"pose": {"refine": "clip"}})
