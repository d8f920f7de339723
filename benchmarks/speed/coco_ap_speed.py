"""Pose AP from files, whole process: ours vs stock xtcocotools vs faster-coco-eval, side by side.

Writes a COCO keypoint GT file and a results file (``evaluators.pose.synthetic``: default 2,500
images, 308 keypoints, about two people per image with COCOeval's edge cases), then times complete
processes (interpreter start, imports, JSON parsing, evaluation, printing), each the median of
``--repeats`` runs, the engines interleaved so that machine load hits them alike:

* ``ours``: ``sapiens2-bench eval pose --gt G --results R --parts wholebody --detection-area part``
  (the CLI; on a flat 308-keypoint results file xtcocotools takes each detection's area from all
  its keypoints, which is the ``part`` convention for the whole body);
* ``ours-all-parts``: the same with every part of keypoints308 (7 evaluations, for information);
* ``xtcocotools``: ``COCO(G)``, ``loadRes(R)``, ``COCOeval(..., 'keypoints', sigmas, use_area=True)``,
  ``evaluate``/``accumulate``/``summarize``;
* ``faster-coco-eval``: the same with ``faster_coco_eval.COCO``/``COCOeval_faster`` when some Python
  can import it (``--fce-python``; it is not a project dependency: e.g.
  ``python -m venv --system-site-packages /tmp/fce && /tmp/fce/bin/pip install faster-coco-eval``).

Every engine prints its ten whole-body statistics; the script checks they agree within 1e-6.

Usage:
    .venv/bin/python benchmarks/speed/coco_ap_speed.py [--images 2500] [--repeats 3] \
        [--fce-python /tmp/fce/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from benchmarks.results import start_measurement, write_measurement
from evaluators.pose.coco_ap import STAT_NAMES
from evaluators.pose.synthetic import make_keypoint_case
from sapiens2.reference import keypoints308

ROOT = Path(__file__).resolve().parents[2]

_COCO_SCRIPT = """
import json, sys, contextlib, io
import numpy as np
{imports}
sig = np.asarray(json.load(open(sys.argv[3]))["sigmas"], dtype=np.float64)
with contextlib.redirect_stdout(io.StringIO()):
    gt = COCO(sys.argv[1])
    dt = gt.loadRes(sys.argv[2])
    ev = {evaluator}
    ev.evaluate(); ev.accumulate(); ev.summarize()
print(json.dumps([float(s) for s in ev.stats[:10]]))
"""
XTCOCO = _COCO_SCRIPT.format(
    imports="from xtcocotools.coco import COCO\nfrom xtcocotools.cocoeval import COCOeval",
    evaluator="COCOeval(gt, dt, 'keypoints', sig, use_area=True)",
)
FCE = _COCO_SCRIPT.format(
    imports="from faster_coco_eval import COCO, COCOeval_faster",
    evaluator="COCOeval_faster(gt, dt, 'keypoints', kpt_oks_sigmas=sig, use_area=True)",
)


def _write_case(folder: Path, images: int, keypoints: int, seed: int) -> tuple[Path, Path, Path, dict]:
    gt, results = make_keypoint_case(images, keypoints, seed=seed, max_people=3)
    paths = folder / "gt.json", folder / "results.json", folder / "meta.json"
    paths[0].write_text(json.dumps(gt))
    paths[1].write_text(json.dumps(results))
    paths[2].write_text(json.dumps(keypoints308()))
    info = {"images": len(gt["images"]), "gt_instances": len(gt["annotations"]), "results": len(results)}
    return (*paths, info)


def _ours_stats(out: str, json_path: Path) -> list[float]:
    stats = json.loads(json_path.read_text())["wholebody"]
    return [stats[s] for s in STAT_NAMES]


def _run(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    dt = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return dt, proc.stdout


def _can_import(python: str, module: str) -> bool:
    return (
        subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False).returncode == 0
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2500)
    ap.add_argument("--keypoints", type=int, default=308, choices=[308])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="median of N whole-process runs per engine")
    ap.add_argument("--fce-python", default=None, help="a Python that can import faster_coco_eval")
    ap.add_argument("--json", dest="json_out", help="write the timings to this JSON file")
    args = ap.parse_args(argv)

    started = start_measurement()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    py = sys.executable
    fce_py = args.fce_python or (py if _can_import(py, "faster_coco_eval") else None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_p = Path(tmp)
        gt_p, res_p, meta_p, info = _write_case(tmp_p, args.images, args.keypoints, args.seed)
        print(
            f"data: {info['images']} images, {info['gt_instances']} GT instances, {info['results']} results, "
            f"{args.keypoints} keypoints; GT {gt_p.stat().st_size / 2**20:.0f} MB, results "
            f"{res_p.stat().st_size / 2**20:.0f} MB"
        )
        out_json = tmp_p / "ours.json"
        cli = [py, "-m", "benchmarks.cli.main", "eval", "pose", "--gt", str(gt_p), "--results", str(res_p)]
        engines = {
            "ours": cli + ["--parts", "wholebody", "--detection-area", "part", "--json", str(out_json)],
            "xtcocotools": [py, "-c", XTCOCO, str(gt_p), str(res_p), str(meta_p)],
        }
        if fce_py:
            engines["faster-coco-eval"] = [fce_py, "-c", FCE, str(gt_p), str(res_p), str(meta_p)]
        engines["ours-all-parts"] = cli
        times: dict[str, list[float]] = {k: [] for k in engines}
        stats: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for name, cmd in engines.items():
                dt, out = _run(cmd, env)
                times[name].append(dt)
                if name == "ours":
                    stats[name] = _ours_stats(out, out_json)
                elif name != "ours-all-parts":
                    stats[name] = json.loads(out.strip().splitlines()[-1])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'engine':<20}{'seconds (median)':>18}{'x ours':>10}")
    for name, t in med.items():
        print(f"{name:<20}{t:>18.2f}{t / med['ours']:>10.2f}")
    if not fce_py:
        print("faster-coco-eval: no Python here imports it (pass --fce-python); not timed")
    errs = {k: max(abs(a - b) for a, b in zip(v, stats["ours"])) for k, v in stats.items() if k != "ours"}
    for k, e in errs.items():
        print(f"max |ours - {k}| over the ten whole-body stats: {e:.3g}")
    if "faster-coco-eval" in stats:
        fx = max(abs(a - b) for a, b in zip(stats["faster-coco-eval"], stats["xtcocotools"]))
        print(f"max |faster-coco-eval - xtcocotools|: {fx:.3g} (the reference is xtcocotools)")
    if args.json_out:
        write_measurement(args.json_out, "whole-process COCO keypoint AP: ours against xtcocotools and "
                          "faster-coco-eval", {**info, "seconds": med, "max_abs_err": errs}, started=started)
    return 0 if errs["xtcocotools"] <= 1e-6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
