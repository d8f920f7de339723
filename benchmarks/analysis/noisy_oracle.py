"""A quality ladder with a known order: the ground-truth oracle's features plus Gaussian noise.

At noise level ``sigma`` every feature channel gets noise of ``sigma`` times that channel's RMS over
the split (seeded, so a rerun draws the same noise); ``sigma = 0`` is the oracle and ``sigma = inf``
(pure noise, no signal) carries nothing, so under the read-out it must land on the feature-free
floor. A read-out that measures features scores the levels in their order on every task
(``tests/test_probe_v5.py``; docs/probing.md, "Validity").

Example:
    python -m benchmarks.analysis.noisy_oracle --data DIR --levels 0,0.5,1,2,4,inf
"""

from __future__ import annotations

import argparse
import math

import torch

from benchmarks.probe.api import _floor_features, _oracle_features
from benchmarks.probe.data import as_data_source, load_task_split, sample_indices
from benchmarks.probe.evaluate import evaluate_decoder
from benchmarks.probe.features import FeatureSet
from benchmarks.probe.headline import PROBE_HEADLINE
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.shortcut import fit_shortcut
from benchmarks.probe.tasks import build_task
from benchmarks.probe.train import train_decoder


def noisy_oracle_features(task, tgt: dict, protocol, sigma: float, seed: int, train_tgt=None) -> FeatureSet:
    """The oracle's features of ``tgt`` plus noise of ``sigma`` x each channel's RMS (``inf``: noise only;
    ``train_tgt``: the train targets, for a masked task's prior)."""
    clean = _oracle_features(task, tgt, protocol, train_tgt=train_tgt)
    f = clean.feats.float()
    rms = f.square().mean(dim=(0, 2, 3), keepdim=True).sqrt().clamp_min(1e-6)
    noise = torch.randn(f.shape, generator=torch.Generator().manual_seed(seed)) * rms
    feats = noise if math.isinf(sigma) else f + sigma * noise
    return FeatureSet(feats, None, clean.patch_size, clean.valid_frac, clean.image_size)


def probe_features(task, train_feat, train_tgt, test_feat, test_tgt, test_idx, protocol) -> tuple[dict, dict]:
    """(metrics, intervals) of the protocol's linear read-out fitted on ``train_feat``."""
    shortcut = fit_shortcut(task, train_feat, train_tgt, protocol)
    decoder, _ = train_decoder(task, train_feat, train_tgt, protocol, seed=0, shortcut=shortcut)
    metrics, _, intervals = evaluate_decoder(task, decoder, test_feat, test_tgt, test_idx, protocol)
    return metrics, intervals


def ladder(data, task_name: str, levels, protocol=None) -> list[dict]:
    """Headline metric of every noise level (then of the floor) on ``task_name``.

    Returns:
        ``[{"level": sigma or "floor", "value", "bounds", "n"}]`` in the order of ``levels``, floor last.
    """
    protocol = protocol or default_protocol()
    source = as_data_source(data)
    task = build_task(task_name, protocol)
    train = load_task_split(source, task, protocol.train_split, protocol, protocol.max_train_samples)
    test = load_task_split(source, task, protocol.test_split, protocol, protocol.max_test_samples)
    tr, te, idx = task.targets(train), task.targets(test), sample_indices(test)
    key = PROBE_HEADLINE[task_name].key
    out = []
    for level in [*levels, "floor"]:
        if level == "floor":
            ftr, fte = _floor_features(task, tr, protocol), _floor_features(task, te, protocol)
        else:
            ftr = noisy_oracle_features(task, tr, protocol, float(level), seed=0)
            fte = noisy_oracle_features(task, te, protocol, float(level), seed=1, train_tgt=tr)
        metrics, iv = probe_features(task, ftr, tr, fte, te, idx, protocol)
        out.append({"level": level, "value": metrics[key], "bounds": iv["bounds"].get(key), "n": iv["n"]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--tasks", default="pose,seg,normal,pointmap,albedo")
    ap.add_argument("--levels", default="0,0.5,1,2,4,inf")
    args = ap.parse_args(argv)
    levels = [float(v) for v in args.levels.split(",")]
    for t in args.tasks.split(","):
        for row in ladder(args.data, t, levels):
            b = row["bounds"] or (float("nan"), float("nan"))
            print(f"{t:9s} {str(row['level']):6s} {row['value']:.5g} [{b[0]:.5g}, {b[1]:.5g}] n={row['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
