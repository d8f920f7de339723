"""How the pose metrics react to keypoint error at the probe's crop size: a Gaussian noise sweep.

Takes the probe's pose test split (the cached synthetic split of the default protocol, or ``--data
DIR``), builds the ground truth exactly as the probe does (``PoseTask.targets`` and
``PoseTask.update_evaluator``: one crop = one image, keypoints in crop pixels, PCK / EPE box = the
annotation box mapped into the crop where the sample has one, OKS area scaled into the crop),
replaces the decoded predictions by the true keypoints plus isotropic Gaussian noise of ``sigma``
crop pixels per coordinate (all keypoint scores 1, seed fixed), and prints whole-body AP, body AP,
PCK@0.05, PCK@0.1 and EPE per level, each with its 95% bootstrap interval over test images. A row
``UDP codec round trip`` decodes the target heatmaps themselves (what the ground-truth oracle
reaches at best through the probe's codec), and a last row predicts the mean pose of the train split
(per keypoint, in crop pixels) for every test crop: what a read-out learns from features that carry
no information about the person, i.e. where random features should land.

Usage:
    PYTHONPATH=. .venv/bin/python -m benchmarks.analysis.pose_noise_sweep [--data DIR] \
        [--split test] [--levels 0,0.5,1,2,4,8] [--seed 0] [--markdown]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks.mainjob import default_data_dir
from benchmarks.probe.data.source import as_data_source
from benchmarks.probe.protocol import default_protocol
from benchmarks.probe.tasks import build_task
from benchmarks.probe.tasks.pose import PoseTask

METRICS = ("AP", "body/AP", "PCK@0.05", "PCK@0.1", "EPE")


class GivenKeypointsTask(PoseTask):
    """The probe's pose task whose ``decode`` passes given ``(keypoints, scores)`` through."""

    def decode(self, maps):
        return maps


def load_pose_split(data: str | None, split: str, protocol) -> list[dict]:
    """The pose samples of ``split`` (``all``: train and test) from ``data`` or the default split."""
    source = as_data_source(data or default_data_dir(protocol))
    task = build_task("pose", protocol)
    splits = [protocol.train_split, protocol.test_split] if split == "all" else [split]
    samples = []
    for sp in splits:
        samples += source.load("pose", sp, protocol)
    task.check_samples(samples, f"pose noise sweep ({split})")
    return samples


def _row(task, label: str, pred, tgt: dict, index, resamples: int, seed: int, scores=None) -> dict:
    ev = task.make_evaluator()
    scores = torch.ones(pred.shape[:2], dtype=torch.float64) if scores is None else scores
    task.update_evaluator(ev, (pred, scores), None, tgt, index)
    res = ev.compute()
    iv = ev.bootstrap_intervals(list(METRICS), resamples=resamples, seed=seed)
    return {"label": label, "n": ev.num_images, **{m: (res[m], *iv[m]) for m in METRICS}}


def sweep(
    samples: list[dict], protocol, levels, seed: int = 0, resamples: int = 1000, mean_pose=None
) -> list[dict]:
    """One row per noise level (and one for ``mean_pose``, K x 2, when given): metrics, intervals, n."""
    task = GivenKeypointsTask(protocol)
    tgt = task.targets(samples)
    index = torch.tensor([int(s.get("index", i)) for i, s in enumerate(samples)])
    true = tgt["keypoints"].double()
    rows = []
    for sigma in levels:
        rng = np.random.default_rng(seed)
        noisy = true + torch.from_numpy(rng.normal(0.0, 1.0, tuple(true.shape))) * float(sigma)
        rows.append(_row(task, f"{sigma:g}", noisy, tgt, index, resamples, seed))
    kpts, scores = PoseTask.decode(task, tgt["heatmaps"])
    rows.append(_row(task, "UDP codec round trip", kpts, tgt, index, resamples, seed, scores))
    if mean_pose is not None:
        pred = torch.as_tensor(mean_pose, dtype=torch.float64)[None].expand_as(true).clone()
        rows.append(_row(task, "train mean pose", pred, tgt, index, resamples, seed))
    return rows


def train_mean_pose(samples: list[dict], protocol) -> np.ndarray:
    """K x 2 mean crop position of each keypoint over the samples where it is visible."""
    tgt = GivenKeypointsTask(protocol).targets(samples)
    k, v = tgt["keypoints"].double().numpy(), tgt["visibility"].double().numpy()[..., None]
    return (k * v).sum(0) / np.maximum(v.sum(0), 1.0)


def format_table(rows: list[dict], markdown: bool = False) -> str:
    """The rows as a plain or Markdown table (value and [low, high] per metric)."""
    head = ["noise sd (crop px)", *METRICS]
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    else:
        lines.append("  ".join(f"{h:>22}" for h in head))
    for r in rows:
        cells = [r["label"]]
        for m in METRICS:
            v, lo, hi = r[m]
            d = 1 if m == "EPE" else 3
            cells.append(f"{v:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]")
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="data folder (default: the probe's cached synthetic split)")
    p.add_argument("--split", default="test", help="split to use: test, train or all (default test)")
    p.add_argument("--levels", default="0,0.5,1,2,4,8", help="noise sds in crop pixels (comma-separated)")
    p.add_argument("--seed", type=int, default=0, help="noise and bootstrap seed (default 0)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--no-mean-pose", action="store_true", help="leave out the train mean-pose row")
    args = p.parse_args(argv)
    protocol = default_protocol()
    samples = load_pose_split(args.data, args.split, protocol)
    levels = [float(v) for v in args.levels.split(",") if v.strip()]
    t0 = time.perf_counter()
    mean_pose = None
    if not args.no_mean_pose:
        mean_pose = train_mean_pose(load_pose_split(args.data, protocol.train_split, protocol), protocol)
    rows = sweep(samples, protocol, levels, args.seed, args.resamples, mean_pose)
    h, w = protocol.input_size
    print(f"pose noise sweep: {rows[0]['n']} {args.split} crops of {h}x{w}, seed {args.seed}, "
          f"95% bootstrap intervals ({args.resamples} resamples); {time.perf_counter() - t0:.1f} s")
    print(format_table(rows, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
