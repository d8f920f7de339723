"""MediaPipe on the real photos of ``../shared/real`` (COCO, OCHuman, MPII test fixtures): a small anchor.

Each fixture is imported as a split (``sapiens2-bench data import``) and scored by ``system mediapipe``
(:func:`benchmarks.systems.mediapipe_records.run_mediapipe`, default options, pose only): AP on the
landmarks MediaPipe shares with the fixture's keypoint set, with that set's sigmas. A second pass of
the same evaluation (:func:`benchmarks.systems.mediapipe_system.evaluate_pose`) keeps each person's
landmarks for PCK@0.1 (a labelled GT point is a hit within 0.1 x the longer side of its GT box; a
person MediaPipe misses counts all its points as misses) and is checked against the record's AP.

These are a handful of test photos, not a benchmark: the numbers say that the real model on real
photos lands where it should, with n in the measurement.

Usage::
    python -m benchmarks.analysis.mediapipe_real_fixtures --work /tmp/mp-real
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.results import start_measurement, write_measurement
from benchmarks.systems import mediapipe_system as M
from benchmarks.systems.mediapipe_records import run_mediapipe
from sapiens2.datasets import open_split
from sapiens2.datasets.importers import import_dataset
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "references" / "mediapipe_real_fixtures.json"
# fixture -> (import format, annotation file under <shared>/real)
FIXTURES = {"coco": ("coco", "coco/test_coco.json"), "ochuman": ("ochuman", "ochuman/test_ochuman.json"),
            "mpii": ("mpii", "mpii/test_mpii.json")}
INPUT_HW = (256, 192)  # system mediapipe's default crop
PCK_THRESHOLD = 0.1


def pck(split: Path, results: list, landmark_ids: list[int], set_ids: list[int]) -> dict:
    """PCK@0.1 over the labelled (v > 0) shared GT points of every person (missed persons: all misses),
    and over the detected persons only."""
    ds = open_split(split, "pose", input_size=(INPUT_HW[1], INPUT_HW[0]))
    if len(results) != len(ds):
        raise RuntimeError(f"{split}: {len(results)} MediaPipe results for {len(ds)} persons")
    hits = counted = hits_detected = counted_detected = 0
    for i, res in enumerate(results):
        ann = ds.anns[i]
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[set_ids]
        labelled = gt[:, 2] > 0
        counted += int(labelled.sum())
        if res is None:
            continue
        inv = np.asarray(ds[i]["crop"]["inv_affine"], float)
        xy = res.landmarks[landmark_ids] @ inv[:, :2].T + inv[:, 2]
        side = max(float(ann["bbox"][2]), float(ann["bbox"][3]))
        hit = int(((np.linalg.norm(xy - gt[:, :2], axis=1) < PCK_THRESHOLD * side) & labelled).sum())
        hits += hit
        hits_detected += hit
        counted_detected += int(labelled.sum())
    return {"PCK@0.1": round(hits / counted, 4) if counted else None,
            "PCK@0.1_detected": round(hits_detected / counted_detected, 4) if counted_detected else None,
            "labelled_points": counted}


def measure(name: str, split: Path, records: Path, system) -> dict:
    """``system mediapipe`` on ``split`` (its record), and PCK from a second, recorded pass."""
    run_mediapipe(records, data=split, input_size_hw=INPUT_HW, tasks=["pose"], progress=False)
    rec = RecordView(read_record(records / "mediapipe_pose.json"))
    recorder = M.RecordingSystem(system)
    metrics, info = M.evaluate_pose(split, recorder, None, (INPUT_HW[1], INPUT_HW[0]), progress=False)
    if abs(metrics["AP"] - rec.metric("AP")) > 1e-9:
        raise RuntimeError(f"{name}: the recorded pass gives AP {metrics['AP']}, system mediapipe "
                           f"{rec.metric('AP')}: MediaPipe is not deterministic here")
    subset = info["subset"]
    ap = rec.interval("AP")
    return {
        "fixture": name, "keypoint_set": subset.keypoint_set.name,
        "protocol_id": rec.protocol.id, "keypoints_scored": subset.names,
        "n_images": int(info["num_images"]), "n_people": int(info["num_instances"]),
        "missed_people": int(info["missed_instances"]),
        "AP": round(float(ap.value), 4), "AP_95": [round(ap.lo, 4), round(ap.hi, 4)],
        "AR": round(float(rec.metric("AR")), 4),
        "body_AP": round(float(rec.metric("body/AP")), 4),
        **pck(split, recorder.results, subset.landmark_ids, list(subset.set_ids)),
    }


NOTES = ("Test fixtures, not a benchmark: n is tiny (COCO 4 photos, OCHuman 3, MPII 5; the people counts "
         "are in each row) and the photos are mmpose's test data. `system mediapipe` with default options "
         "(crop 256x192 on the GT boxes, min_detection_confidence 0.5). Scored keypoints: the MediaPipe "
         "landmarks whose keypoint the fixture's set has (COCO-17 and OCHuman-17: the 17 body points; "
         "MPII-16: shoulders, elbows, wrists, hips, knees, ankles), with that set's OKS sigmas (MPII's "
         "are mmpose's mpii.py values, wider than COCO's at the shoulders, so its AP is not comparable "
         "with the COCO-17 ones). body_AP = AP here (every scored point is in the body part). PCK@0.1: "
         "labelled (v > 0) points within 0.1 x the longer GT box side, a missed person's points count "
         "as misses; PCK@0.1_detected leaves missed persons out. AP_95: the record's 95 % bootstrap "
         "interval over the fixture's images.")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, help="folder for the imported splits and the records")
    p.add_argument("--shared", default=str(ROOT.parent / "shared"), help="the shared folder holding real/")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="measurement file to write")
    args = p.parse_args(argv)
    real = Path(args.shared) / "real"
    if not real.is_dir():
        raise FileNotFoundError(f"--shared {args.shared}: no real/ folder")
    M.require_mediapipe()
    work = Path(args.work)
    started = start_measurement()
    rows = []
    with M.MediaPipeSystem() as system:
        for name, (fmt, src) in FIXTURES.items():
            split = import_dataset(fmt, real / src, work / name, masks=False, overwrite=True)
            row = measure(name, split, work / f"{name}_records", system)
            print(row, flush=True)
            rows.append(row)
    write_measurement(args.out, f"MediaPipe {M.installed_version()} through `system mediapipe` on the real "
                      "photos of ../shared/real (COCO, OCHuman, MPII test fixtures)", {"fixtures": rows},
                      started=started, notes=NOTES)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
