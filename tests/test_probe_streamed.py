"""The streamed probe spine (lazy scene batches -> feature stream -> per-batch statistics -> solve ->
test stream -> evaluators) gives today's records: same metrics, intervals and chosen penalties."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.protocol import quick_protocol  # noqa: E402
from benchmarks.probe.tasks import build_task  # noqa: E402
from leaderboard.results import flatten_metrics  # noqa: E402

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")


def _linear_protocol():
    p = quick_protocol()
    return p.replace(tasks={t: {"decoder": "linear"} for t in p.tasks}, bootstrap_resamples=50)


def _close(a, b, rel=1e-6, abs_=1e-9) -> bool:
    if a is None or b is None or isinstance(a, str):
        return a == b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return abs(a - b) <= abs_ + rel * abs(a)


def _today(backbone, data, protocol, out) -> dict:
    from benchmarks.probe.api import run_probe

    paths = run_probe(backbone, list(TASKS), data, out, protocol=protocol)
    recs = [json.loads(p.read_text()) for p in paths]
    return {r["task"]: r for r in recs}


@pytest.mark.parametrize(
    "backbone", [{"type": "PixelPatches", "patch_size": 4}, "gt-oracle", "sapiens2_tiny"], ids=str
)
def test_streamed_linear_probe_equals_todays_records(tmp_path, backbone):
    from benchmarks.probe.backbones import ORACLE, build_probe_backbone
    from benchmarks.probe.features import FeatureStore
    from benchmarks.probe.streamed import streamed_linear_probe

    p = _linear_protocol()
    data = make_toy_data(n_train=9, n_test=5)
    p = p.replace(max_train_samples=9, max_test_samples=5)
    today = _today(dict(backbone) if isinstance(backbone, dict) else backbone, data, p, tmp_path / "today")
    store = None
    if backbone != ORACLE:
        spec = dict(backbone) if isinstance(backbone, dict) else backbone
        bb = build_probe_backbone(spec, img_size=p.input_size)
        layers = p.tapped_layers(bb.num_layers)
        store = FeatureStore(bb, layers, p, cache_dir=tmp_path / "cache", keep_in_memory=False)
    tasks = {t: build_task(t, p) for t in TASKS}
    got = streamed_linear_probe(data, tasks, p, store=store, batch_size=4)
    for t in TASKS:
        ref, new = today[t], got[t]
        flat, breakdowns = flatten_metrics(new["metrics"])
        assert set(flat) == set(ref["metrics"]), t
        bad = {k: (v, flat[k]) for k, v in ref["metrics"].items() if not _close(v, flat[k])}
        assert not bad, (t, bad)
        for name, items in breakdowns.items():
            assert all(_close(v, ref["breakdowns"][name][k]) for k, v in items.items()), (t, name)
        rb, nb = ref["intervals"]["bounds"], new["intervals"]["bounds"]
        assert set(rb) == set(nb) and all(_close(a, b) for k in rb for a, b in zip(rb[k], nb[k])), t
        assert ref["intervals"]["images_sha256"] == new["intervals"]["images_sha256"]
        rs, ns = ref["config"]["shortcut"], new["shortcut"]
        assert rs["alpha"] == ns["alpha"] and _close(rs["heldout_r2"], ns["heldout_r2"], rel=1e-5), (
            t,
            rs,
            ns,
        )
    if store is not None:
        # the toy tasks share their scenes: one forward per train and per test image (the mean pass
        # and the statistics pass read the disk cache), nothing kept in RAM
        assert store.memory == {} and store.backbone_images == 9 + 5


def test_streamed_probe_refuses_trained_decoders():
    from benchmarks.probe.streamed import streamed_linear_probe

    p = quick_protocol()  # pixel-shuffle bodies
    with pytest.raises(ValueError, match="only the 'linear' decoder streams"):
        streamed_linear_probe(make_toy_data(), {"seg": build_task("seg", p)}, p)
