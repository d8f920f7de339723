"""Run the MediaPipe reference system on a split and write its leaderboard records (library of ``system``).

Example (needs ``bash scripts/install_mediapipe.sh``)::

    from benchmarks.systems.mediapipe_records import run_mediapipe
    paths = run_mediapipe("out/records", data="my_split", n=8, input_size_hw=(256, 192))
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.systems import mediapipe_system as M
from sapiens2.datasets import split_info
from sapiens2.datasets.identity import split_identity
from sapiens2.datasets.synth import ensure_default_split
from sapiens2.records.paths import public_path
from sapiens2.records.results import make_record, write_record

SYSTEM_TASKS = ("pose", "seg")
INTERVAL_RESAMPLES = 1000  # bootstrap resamples of the test images for the 95 % intervals of AP


def _dataset(data: Path, n: int | None, num_samples: int) -> dict:
    info = split_info(data)
    return {"name": str(info.get("name") or data.name), "split": "all" if n is None else f"first{n}",
            "content_hash": split_identity(data), "num_samples": num_samples, "root": public_path(data)}


def run_mediapipe(out, data=None, n: int | None = None, input_size_hw: tuple[int, int] = (256, 192),
                  min_detection_confidence: float = 0.5, tasks=SYSTEM_TASKS,
                  progress: bool = True) -> list[Path]:
    """Evaluate MediaPipe on a split and write its result records under ``out``.

    Args:
        out: folder for ``mediapipe_pose.json``, ``mediapipe_pose_seg.json``, ``mediapipe_selfie_seg.json``.
        data: split folder with ``split.json`` (default: the embedded synthetic split, 64 images).
        n: evaluate only the first ``n`` images.
        input_size_hw: top-down pose crop size (H, W).
        min_detection_confidence: MediaPipe person detector threshold.
        tasks: some of ``pose``, ``seg``.
        progress: show progress bars.

    Returns:
        The record paths written.
    """
    tasks = list(tasks)
    unknown = sorted(set(tasks) - set(SYSTEM_TASKS))
    if unknown or not tasks:
        raise ValueError(f"tasks: unknown {unknown or tasks}; choose from {', '.join(SYSTEM_TASKS)}")
    if n is not None and n < 1:
        raise ValueError(f"n {n}: must be >= 1")
    size = (int(input_size_hw[1]), int(input_size_hw[0]))  # the pose reader's (w, h)
    if min(size) < 16:
        raise ValueError(f"input size {input_size_hw} (H, W): too small (at least 16x16)")
    M.require_mediapipe()  # clear install hint before any data is rendered
    if data is None:
        data = Path(ensure_default_split())
    else:
        data = Path(data)
        if not (data / "split.json").is_file():
            raise FileNotFoundError(
                f"--data {data}: no split.json (make one with `sapiens2-bench data synth`)"
            )
    out = Path(out)
    written = []
    with M.MediaPipeSystem(min_detection_confidence=min_detection_confidence) as system:
        weights = f"pretrained (mediapipe {M.installed_version()} wheel)"
        base_config = {"system": "mediapipe", **system.config, "data": str(data), "n": n}
        if "pose" in tasks:
            metrics, info = M.evaluate_pose(data, system, n, size, progress=progress)
            subset, count = info["subset"], len(info["subset"].rows)
            ks = subset.keypoint_set
            files = M.model_files_info(system.mp, M.POSE_MODEL_FILES)
            conventions = {
                **metrics["conventions"],
                # MediaPipe landmark -> the split's keypoint it is scored as (with the set's sigma)
                "keypoint_subset": subset.landmark_names(),
                "left_out": dict(M.LEFT_OUT),
                "protocol": "top-down on GT person boxes (UDP crop, padding 1.25), one MediaPipe pose per "
                            "crop; a crop without a detection is a missed person",
                "keypoint_scores": "MediaPipe landmark visibility",
                "coordinates": "MediaPipe normalised x * W - 0.5 (pixel centres at integers)",
            }
            scope = (f"all of {ks.name}, with its sigmas" if count == ks.num_keypoints
                     else f"not comparable with {ks.num_keypoints}-keypoint AP")
            absent = [row[1] for row in M.LANDMARK_MAP if row not in subset.rows]
            if absent:  # mapped landmarks the split's keypoint set has no keypoint for
                conventions["not_in_keypoint_set"] = absent
            ev, keys = info["evaluator"], ["AP", *(f"{p}/AP" for p in subset.meta()["parts"])]
            bounds = ev.bootstrap_intervals(keys, resamples=INTERVAL_RESAMPLES, seed=0)
            intervals = {"level": 0.95, "method": "bootstrap", "resamples": INTERVAL_RESAMPLES, "seed": 0,
                         "n": int(ev.num_images), "bounds": {k: list(v) for k, v in bounds.items()}}
            rec = make_record(
                model={"name": M.POSE_MODEL_NAME, "backbone": "BlazePose GHUM full", "params": None,
                       "weights": weights,
                       "checkpoint": {"path": files[1]["path"], "sha256": files[1]["sha256"]}},
                task="pose", dataset=_dataset(data, n, info["num_instances"]),
                protocol={"kind": "eval", "protocol_id": subset.protocol_id,
                          "description": f"AP on the {count} keypoints MediaPipe shares with {ks.name}, "
                                         f"GT boxes; {scope}"},
                metrics=metrics, conventions=conventions, intervals=intervals,
                # input_size: the crop (w, h), as the pose reader takes it
                config={**base_config, "task": "pose", "input_size": list(size), "model_files": files},
                seeds=[0], timings={"eval_s": info["seconds"]},
                notes=f"{info['missed_instances']} of {info['num_instances']} persons not detected",
            )
            written.append(write_record(out / "mediapipe_pose.json", rec))
            parts = subset.meta()["parts"]
            print(f"pose ({count} keypoints shared with {ks.name}, {info['num_instances']} persons, "
                  f"{info['missed_instances']} missed): AP {metrics['AP']:.4f} "
                  f"[{bounds['AP'][0]:.4f}, {bounds['AP'][1]:.4f}]  AR {metrics['AR']:.4f}"
                  + "".join(f"  {p} AP {metrics[p + '/AP']:.4f}" for p in parts if len(parts) > 1))
        if "seg" in tasks:
            results, info = M.evaluate_masks(data, system, n, progress=progress)
            for key, name, rels in (("pose", M.POSE_MODEL_NAME, M.POSE_MODEL_FILES),
                                    ("selfie", M.SELFIE_MODEL_NAME, M.SELFIE_MODEL_FILES)):
                files = M.model_files_info(system.mp, rels)
                conventions = {**results[key]["conventions"],
                               "classes": "0 background, 1 person (GT: any of the 28 body/apparel classes)",
                               "prediction": "MediaPipe person probability > 0.5"
                               + ("; one person per image (the pose landmarker's); no detection = all "
                                  "background" if key == "pose" else "")}
                rec = make_record(
                    model={"name": name, "params": None, "weights": weights,
                           "checkpoint": {"path": files[-1]["path"], "sha256": files[-1]["sha256"]}},
                    task="seg", dataset=_dataset(data, n, info["num_images"]),
                    protocol={"kind": "eval", "protocol_id": M.SEG_PROTOCOL_ID,
                              "description": "person vs background (2 classes); "
                                             "not comparable with 29-class mIoU"},
                    metrics=results[key], conventions=conventions,
                    config={**base_config, "task": "seg", "mask_source": key, "model_files": files},
                    seeds=[0], timings={"eval_s": info["seconds"]},
                    notes=(f"pose landmarker detected nobody in {info['pose_no_person']} of "
                           f"{info['num_images']} images" if key == "pose" else None),
                )
                written.append(write_record(out / f"mediapipe_{key}_seg.json", rec))
                r = results[key]
                print(f"seg person-vs-background ({key} mask, {info['num_images']} images): "
                      f"mIoU {r['mIoU']:.2f}  person IoU {100 * r['per_class']['IoU']['person']:.2f}  "
                      f"aAcc {r['aAcc']:.2f}")
    return written
