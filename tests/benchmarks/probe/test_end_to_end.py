"""End-to-end probe runs on the embedded synthetic data: the ground-truth-feature sanity check, random-init
backbones below it, valid records for every backbone family, and the CLI."""

from __future__ import annotations

import pytest

from benchmarks.probe.protocol import default_protocol, quick_protocol

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")


@pytest.fixture(scope="module")
def synth128(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split(
        "probe-test", 16, (128, 96), 0, root=tmp_path_factory.mktemp("synth"), progress=False
    )


@pytest.fixture(scope="module")
def synth64(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split(
        "probe-test", 12, (64, 48), 1, root=tmp_path_factory.mktemp("synth"), progress=False
    )


def _metrics(paths):
    from sapiens2.records.results import read_record

    return {read_record(p)["task"]: read_record(p)["metrics"] for p in paths}


def _codec_ceiling(data, protocol) -> float:
    """Wholebody AP of the GT heatmaps themselves, UDP-decoded: the best any pose probe can reach."""
    from benchmarks.probe.data.source import FolderData, sample_indices
    from benchmarks.probe.tasks import build_task

    task = build_task("pose", protocol)
    samples = FolderData(data).load("pose", protocol.test_split, protocol)
    tgt = task.targets(samples)
    ev = task.make_evaluator()
    task.update_evaluator(ev, tgt["heatmaps"], None, tgt, sample_indices(samples))
    return ev.compute()["AP"]


def test_ground_truth_as_prediction_scores_perfectly(synth64):
    """The evaluation path itself: each task's GT fed in as the prediction gives perfect metrics."""
    import torch.nn.functional as F

    from benchmarks.probe.data.source import FolderData, sample_indices
    from benchmarks.probe.tasks import build_task

    protocol = quick_protocol()
    data = FolderData(synth64)
    for name in ("seg", "normal", "pointmap", "albedo"):
        task = build_task(name, protocol)
        samples = data.load(name, protocol.test_split, protocol)
        tgt = task.targets(samples)
        ev = task.make_evaluator()
        if name == "seg":
            maps, glob = F.one_hot(tgt["label"].clamp_max(28), 29).permute(0, 3, 1, 2) * 10.0, None
        else:  # the masked tasks' read-out targets end with the mask channel
            maps, glob = task.linear_targets(tgt)[:, : task.out_channels], None
        task.update_evaluator(ev, maps, glob, tgt, sample_indices(samples))
        m = ev.compute()
        perfect = {"seg": ("mIoU", 100.0), "normal": ("normal_mae", 0.0), "pointmap": ("l2_mean", 0.0)}
        key, want = perfect.get(name, ("mae", 0.0))
        assert abs(m[key] - want) < 1e-3, (name, key, m[key])


@pytest.mark.slow
def test_ground_truth_features_reach_the_ceiling_and_random_backbones_do_not(synth128, tmp_path):
    from benchmarks.probe.api import run_probe

    # one protocol for the oracle and the random backbone (no decoder override for the oracle)
    protocol = default_protocol().replace(input_size=(128, 96), batch_size=4)
    oracle = _metrics(run_probe("gt-oracle", TASKS, synth128, tmp_path, protocol=protocol))
    rand = _metrics(run_probe("sapiens2_tiny", TASKS, synth128, tmp_path, protocol=protocol))
    ceiling = _codec_ceiling(synth128, protocol)
    print(
        "oracle",
        {
            t: {
                k: oracle[t][k]
                for k in ("mIoU", "normal_mae", "mae", "rel_point_err", "AP")
                if k in oracle[t]
            }
            for t in oracle
        },
        "codec ceiling AP",
        ceiling,
    )
    print(
        "random",
        {
            t: {k: rand[t][k] for k in ("mIoU", "normal_mae", "mae", "rel_point_err", "AP") if k in rand[t]}
            for t in rand
        },
    )
    # 12 training images at 128x96, protocol v3 (measured: pose AP = the 0.74 codec ceiling, seg mIoU
    # 93.5 (parts absent from the 12 train scenes cannot be learnt), normal 0.0007 deg, pointmap rel.
    # error 0.0013, albedo MAE 9e-6; random-init: AP 0, 5.4, 50 deg, 0.25, 0.21)
    assert oracle["pose"]["AP"] > 0.99 * ceiling
    assert oracle["seg"]["mIoU"] > 85
    assert oracle["normal"]["normal_mae"] < 0.5
    assert oracle["albedo"]["mae"] < 1e-3
    assert oracle["pointmap"]["rel_point_err"] < 0.01
    assert rand["seg"]["mIoU"] < oracle["seg"]["mIoU"] - 30
    assert rand["normal"]["normal_mae"] > oracle["normal"]["normal_mae"] + 25
    assert rand["albedo"]["mae"] > oracle["albedo"]["mae"] + 0.08
    assert rand["pointmap"]["rel_point_err"] > 2 * oracle["pointmap"]["rel_point_err"]
    assert rand["pose"]["AP"] < oracle["pose"]["AP"] - 0.3


@pytest.mark.slow
@pytest.mark.parametrize("backbone", ["sapiens2_tiny", "sapiens_tiny", "dinov2_small_tiny", "pixels"])
def test_backbone_families_write_valid_records(backbone, synth64, tmp_path):
    from benchmarks.probe.api import run_probe
    from sapiens2.records.results import read_record

    tasks = TASKS if backbone == "sapiens2_tiny" else ("seg", "pose")
    paths = run_probe(backbone, tasks, synth64, tmp_path, seeds=(0, 1), protocol="quick")
    assert len(paths) == 3 * len(tasks)
    q = quick_protocol()
    for p in paths:
        rec = read_record(p)
        assert rec["protocol"] == {
            "kind": "probe",
            "protocol_id": q.protocol_id(rec["task"]),
            "description": rec["protocol"]["description"],
        }
        assert rec["config"]["protocol"] == q.task_protocol(rec["task"])
        assert rec["model"]["name"] == backbone and rec["dataset"]["content_hash"]
    mean = read_record(tmp_path / backbone / q.protocol_id("seg") / "seg" / "mean.json")
    assert mean["seeds"] == [0, 1] and "mIoU" in mean["metrics_std"]


@pytest.mark.slow
def test_cli_probe(synth64, tmp_path, capsys):
    from benchmarks.cli.main import main

    code = main(
        [
            "probe",
            "--backbone",
            "pixels",
            "--tasks",
            "seg,albedo",
            "--data",
            str(synth64),
            "--out",
            str(tmp_path),
            "--seeds",
            "0",
            "--quick",
            "--feature-cache",
            str(tmp_path / "cache"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "seg mIoU %" in out and "albedo MAE % of range" in out
    assert "each cell: value [95% interval]" in out and "n (test images): " in out
    assert "pixels" in out
    assert (tmp_path / "pixels" / quick_protocol().protocol_id("albedo") / "albedo" / "seed0.json").is_file()
    assert (
        main(
            [
                "probe",
                "--backbone",
                "no_such_backbone",
                "--tasks",
                "seg",
                "--data",
                str(synth64),
                "--out",
                str(tmp_path),
                "--quick",
            ]
        )
        == 1
    )
    assert "unknown probe backbone" in capsys.readouterr().err


def test_cli_reports_missing_ground_truth(synth64, tmp_path, capsys):
    import shutil

    from benchmarks.cli.main import main
    from sapiens2.utils_io import read_json, write_json_atomic

    data = tmp_path / "data"
    shutil.copytree(synth64, data)
    info = read_json(data / "split.json")
    info["tasks"].pop("normal")
    write_json_atomic(data / "split.json", info)
    code = main(
        [
            "probe",
            "--backbone",
            "pixels",
            "--tasks",
            "seg,normal",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "out"),
            "--quick",
        ]
    )
    assert code == 1 and "no normal ground truth" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
