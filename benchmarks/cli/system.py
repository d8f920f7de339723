"""``sapiens2-bench system NAME``: evaluate an off-the-shelf pretrained reference system.

``system mediapipe --data DIR --out DIR [--n N]`` runs MediaPipe 0.10.21 (pose landmarker and
selfie segmenter, the models its wheel ships) on a split folder and writes leaderboard result
records: pose AP on the keypoints MediaPipe shares with our vocabulary (protocol
``eval:shared27-gtbox-v1``) and person-vs-background segmentation (``eval:person-vs-background-v1``).
These protocols are their own leaderboard tables, never ranked with full-vocabulary results.
Mapping and caveats: docs/reference_systems.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("system", help="evaluate an off-the-shelf pretrained reference system (mediapipe)",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("name", choices=["mediapipe"], help="reference system")
    p.add_argument("--data", default=None,
                   help="split folder with split.json (default: the embedded synthetic split, 64 images)")
    p.add_argument("--out", required=True, help="folder for the result records")
    p.add_argument("--n", type=int, default=None, help="evaluate only the first N images")
    p.add_argument("--input-size", default="192x256",
                   help="top-down pose crop WxH (default 192x256, the 3:4 aspect of Sapiens2's 768x1024)")
    p.add_argument("--min-detection-confidence", type=float, default=0.5,
                   help="MediaPipe person detector threshold (default 0.5)")
    p.add_argument("--tasks", default="pose,seg", help="comma-separated: pose, seg")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def _parse_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--input-size {text!r}: expected WxH, e.g. 192x256") from None
    if w < 16 or h < 16:
        raise ValueError(f"--input-size {text!r}: too small (at least 16x16)")
    return w, h


def _dataset(data: Path, n: int | None, num_samples: int) -> dict:
    from leaderboard.results import dataset_content_hash
    from sapiens2.datasets import split_info

    info = split_info(data)
    return {"name": str(info.get("name") or data.name), "split": "all" if n is None else f"first{n}",
            "content_hash": dataset_content_hash(data), "num_samples": num_samples, "root": str(data)}


def run(args: argparse.Namespace) -> int:
    """Evaluate the system and write its records; returns the exit code."""
    from benchmarks.systems import mediapipe_system as M
    from leaderboard.results import make_record, write_record

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = sorted(set(tasks) - {"pose", "seg"})
    if unknown or not tasks:
        raise ValueError(f"--tasks: unknown {unknown or tasks}; choose from pose, seg")
    if args.n is not None and args.n < 1:
        raise ValueError(f"--n {args.n}: must be >= 1")
    size = _parse_size(args.input_size)
    M.require_mediapipe()  # clear install hint before any data is rendered
    if args.data is None:
        from sapiens2.datasets.synth import ensure_default_split

        data = Path(ensure_default_split())
    else:
        data = Path(args.data)
        if not (data / "split.json").is_file():
            raise FileNotFoundError(
                f"--data {data}: no split.json (make one with `sapiens2-bench data synth`)"
            )
    out = Path(args.out)
    written = []
    with M.MediaPipeSystem(min_detection_confidence=args.min_detection_confidence) as system:
        weights = f"pretrained (mediapipe {M.installed_version()} wheel)"
        base_config = {"system": "mediapipe", **system.config, "data": str(data), "n": args.n}
        if "pose" in tasks:
            metrics, info = M.evaluate_pose(data, system, args.n, size, progress=not args.no_progress)
            files = M.model_files_info(system.mp, M.POSE_MODEL_FILES)
            conventions = {
                **metrics["conventions"],
                "keypoint_subset": {mp_name: ours for _, mp_name, ours, _ in M.LANDMARK_MAP},
                "left_out": dict(M.LEFT_OUT),
                "protocol": "top-down on GT person boxes (UDP crop, padding 1.25), one MediaPipe pose per "
                            "crop; a crop without a detection is a missed person",
                "keypoint_scores": "MediaPipe landmark visibility",
                "coordinates": "MediaPipe normalised x * W - 0.5 (pixel centres at integers)",
            }
            rec = make_record(
                model={"name": M.POSE_MODEL_NAME, "backbone": "BlazePose GHUM full", "params": None,
                       "weights": weights,
                       "checkpoint": {"path": files[1]["path"], "sha256": files[1]["sha256"]}},
                task="pose", dataset=_dataset(data, args.n, info["num_instances"]),
                protocol={"kind": "eval", "protocol_id": M.POSE_PROTOCOL_ID,
                          "description": f"AP on the {len(M.LANDMARK_MAP)} keypoints MediaPipe shares with "
                                         "keypoints308, GT boxes; not comparable with 308-keypoint AP"},
                metrics=metrics, conventions=conventions,
                config={**base_config, "task": "pose", "input_size": list(size), "model_files": files},
                seeds=[0], timings={"eval_s": info["seconds"]},
                notes=f"{info['missed_instances']} of {info['num_instances']} persons not detected",
            )
            written.append(write_record(out / "mediapipe_pose.json", rec))
            print(f"pose ({len(M.LANDMARK_MAP)} shared keypoints, {info['num_instances']} persons, "
                  f"{info['missed_instances']} missed): AP {metrics['AP']:.4f}  AR {metrics['AR']:.4f}  "
                  + "  ".join(f"{p} AP {metrics[p + '/AP']:.4f}" for p in ("body", "foot", "face",
                                                                           "left_hand", "right_hand")))
        if "seg" in tasks:
            results, info = M.evaluate_masks(data, system, args.n, progress=not args.no_progress)
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
                    task="seg", dataset=_dataset(data, args.n, info["num_images"]),
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
    for p in written:
        print(f"wrote {p}")
    return 0
