"""A quality ladder with a known order: features made of the scene's own ground truth, plus noise.

:class:`GroundTruthStream` is a feature stream of the probe's spine (:mod:`benchmarks.probe.readout.stream`)
whose features hold, for every task of a scene group at once, that task's read-out targets (seg's
one-hot classes, pose's heatmaps, a masked task's ``mask * t`` and mask), rearranged losslessly
(space-to-depth) to the decoder's stage stride: the same features for every task of the group, as a
backbone's, and nothing a backbone could not hold (no train statistic). At noise level ``sigma`` each
channel gets Gaussian noise of ``sigma`` times that channel's RMS over the split's first batch (seeded
per image, so a rerun draws the same noise); ``sigma = 0`` holds the ground truth linearly and the
read-out must reach the ceiling (seg 100 %, normal and pointmap and albedo errors near 0);
``sigma = inf`` (pure noise) carries nothing. Under the read-out the levels score in their order, and
the infinite penalty on any of them is the feature-free floor exactly
(``tests/benchmarks/probe/test_readout_ceiling.py``; docs/design/readout_ceiling.md).

Example:
    python -m benchmarks.analysis.noisy_oracle --levels 0,1,3,inf --out benchmarks/results/x.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from benchmarks.mainjob import default_data_dir
from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.data.source import as_data_source
from benchmarks.probe.features.reference import oracle_features
from benchmarks.probe.features.store import FeatureSet
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.readout.feature_streams import ReferenceStream
from benchmarks.probe.readout.stream import fit_group, scene_groups, score_group
from benchmarks.probe.records.headline import PROBE_HEADLINE
from benchmarks.probe.tasks import build_task


class GroundTruthStream:
    """Every task's ground truth of a scene batch as one shared feature stream, with noise.

    Args:
        tasks: ``{name: ProbeTask}`` (the group's tasks are read off each batch's targets).
        protocol: the protocol (the decoder's stage stride sets the feature grid).
        sigma: noise in units of each channel's RMS (0: none; ``inf``: the noise alone).
        seed: noise seed (with each image's id).
    """

    shared = True

    def __init__(self, tasks: dict, protocol, sigma: float = 0.0, seed: int = 0):
        if not sigma >= 0:
            raise ValueError(f"ground-truth stream: sigma must be >= 0 or inf, got {sigma!r}")
        self.tasks, self.protocol, self.sigma, self.seed = tasks, protocol, float(sigma), seed
        self.rms: dict = {}  # per task group: the channel RMS of the first batch it saw

    def __call__(self, batch, task=None) -> FeatureSet:
        names = sorted(batch.targets)
        parts = [oracle_features(self.tasks[t], batch.targets[t], self.protocol) for t in names]
        if len({(p.patch_size, tuple(p.feats.shape[-2:])) for p in parts}) != 1:
            raise ValueError(f"ground-truth stream: tasks {names} have features on different grids")
        f = torch.cat([p.feats.float() for p in parts], dim=1)
        if self.sigma:
            key = tuple(names)
            if key not in self.rms:
                self.rms[key] = f.square().mean(dim=(0, 2, 3), keepdim=True).sqrt().clamp_min(1e-6)
            noise = torch.stack([_noise(f.shape[1:], f"{self.seed}|{i}") for i in batch.ids]) * self.rms[key]
            f = noise if math.isinf(self.sigma) else f + self.sigma * noise
        first = parts[0]
        return FeatureSet(f, None, first.patch_size, first.valid_frac, first.image_size)


def _noise(shape, key: str) -> torch.Tensor:
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") & (2**63 - 1)
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed))


def probe_stream(data, task_names, stream_of, protocol, alphas=None) -> dict:
    """``{task: metrics}`` of the linear read-out on the features of ``stream_of(tasks)``.

    Args:
        data: a data folder or :class:`~benchmarks.probe.data.source.MemoryData`.
        task_names: the tasks.
        stream_of: ``{name: ProbeTask} -> feature stream`` (e.g. a :class:`GroundTruthStream`).
        protocol: the protocol (its linear read-out; ``max_*_samples`` limit the splits).
        alphas: penalty grid instead of the protocol's (``()``: the infinite penalty alone).
    """
    source = as_data_source(data)
    tasks = {t: build_task(t, protocol) for t in task_names}
    train, test = (SceneLoader(source, tasks, split, protocol, limit=limit)
                   for split, limit in ((protocol.train_split, protocol.max_train_samples),
                                        (protocol.test_split, protocol.max_test_samples)))
    stream = stream_of(tasks)
    out = {}
    for group, test_group in scene_groups(train, test):
        fits, _ = fit_group(train, group, tasks, stream, protocol, desc="ladder train", alphas=alphas)
        evaluators, _ = score_group(test, test_group, tasks, stream, fits, protocol, desc="ladder test")
        for t, ev in evaluators.items():
            out[t] = {"metrics": ev.compute(), "readout": fits[t].describe()}
    return out


def ladder(data, task_names, levels, protocol=None) -> dict:
    """The headline of every task at every noise level, at the infinite penalty on the clean ground
    truth (``"inf-penalty"``) and on the floor's features (``"floor"``).

    Returns:
        ``{row: {task: {"value": headline, "alpha": chosen penalty}}}``, rows in the order of ``levels``.
    """
    protocol = protocol or default_protocol()
    rows = {str(s): (lambda tasks, s=s: GroundTruthStream(tasks, protocol, s), None) for s in levels}
    rows["inf-penalty"] = (lambda tasks: GroundTruthStream(tasks, protocol, 0.0), ())
    rows["floor"] = (lambda tasks: ReferenceStream("floor", protocol), None)
    out = {}
    for row, (stream_of, alphas) in rows.items():
        got = probe_stream(data, task_names, stream_of, protocol, alphas)
        out[row] = {t: {"value": r["metrics"][PROBE_HEADLINE[t].key], "alpha": r["readout"]["alpha"]}
                    for t, r in got.items()}
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="data folder (default: the main job's synthetic split)")
    ap.add_argument("--tasks", default="pose,seg,normal,pointmap,albedo")
    ap.add_argument("--levels", default="0,1,3,inf")
    ap.add_argument("--out", default=None, help="write the ladder (with how it was made) to this JSON file")
    args = ap.parse_args(argv)
    protocol = default_protocol()
    if args.data is None:
        args.data = default_data_dir(protocol)
    t0 = time.perf_counter()
    result = ladder(args.data, args.tasks.split(","), [float(v) for v in args.levels.split(",")], protocol)
    for row, per_task in result.items():
        cells = (f"{t} {v['value']:.6g} (alpha {v['alpha']})" for t, v in per_task.items())
        print(f"{row:12s} " + "  ".join(cells))
    if args.out:
        given = sys.argv[1:] if argv is None else argv
        meta = {"command": "python -m benchmarks.analysis.noisy_oracle " + " ".join(given),
                "commit": _commit(), "machine": platform.platform(),
                "date": datetime.now(timezone.utc).isoformat(),
                "data": str(args.data), "protocol_ids": protocol.protocol_ids(),
                "seconds": round(time.perf_counter() - t0, 1)}
        Path(args.out).write_text(json.dumps({"meta": meta, "ladder": result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
