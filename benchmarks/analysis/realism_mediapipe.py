"""How real do the synthetic people look to a real pretrained model? MediaPipe on three conditions.

Conditions (each a split rendered with one seed, scored by ``system mediapipe``'s protocol):

- ``realistic``: the realistic generator (anny bodies, Mitsuba path tracing) at its default scene
  difficulty (1-2 people, every framing, occluders, lighting);
- ``photo``: the realistic generator's ``photo`` scenes (photo-like pose frequencies: lying rare;
  three quarters of the people turned towards the camera; otherwise the default scenes);
- ``simple``: the realistic generator's ``simple`` scenes (standing or walking people, the whole
  first person in view, no occluding objects; same bodies, clothes, renderer and lighting): what a
  prototype-like full-body photo holds, to separate the look from the scene difficulty;
- ``capsule``: the same-pose ablation: the very same scenes (poses, cameras, occluders, lights,
  colours, classes, keypoints) with each anny body replaced by capsules along its skeleton
  (:mod:`benchmarks.analysis.capsule_people`), same renderer;
- ``procedural``: the procedural generator (ray-cast capsule/ellipsoid people) at the same size,
  seed, image count and people per image; its poses, cameras and occluders are its own (it takes
  no settings for them).

Measured per condition: body AP (COCO-17 of the 27 shared keypoints, GT boxes), PCK@0.1 of the
COCO-17 visible points (a person MediaPipe misses counts as all misses), the share of whole images
in which the pose landmarker finds nobody, and the person-mask IoU of the pose landmarker's mask and
of the selfie segmenter. The result goes to a measurement file (command, commit, machine, date,
load).

Usage::
    python -m benchmarks.analysis.realism_mediapipe --work /tmp/realism --n 64 \\
        --conditions realistic:256x192,capsule:256x192,procedural:256x192
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.analysis.capsule_people import capsule_scenes
from benchmarks.results import read_measurement, start_measurement, write_measurement
from benchmarks.systems import mediapipe_system as M
from evaluators.pose import PoseEvaluator
from evaluators.pose.oks import oks_pairs
from sapiens2.datasets import open_split
from sapiens2.datasets.identity import split_identity
from sapiens2.datasets.synth.realistic.sample import RealisticSettings
from sapiens2.datasets.synth.writer import generate_split
from sapiens2.reference import seg_classes29
from sapiens2.utils_io import read_json, write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "references" / "mediapipe_realistic.json"
CONDITIONS = ("realistic", "photo", "simple", "capsule", "procedural")
COCO17 = 17  # the first 17 entries of the shared keypoints are the COCO body points
EVAL_VERSION = 4  # bump when evaluate_condition's result changes (kept results are then remade)
FEW_LABELLED = 5  # a person with at most this many COCO-17 points labelled is cut by the border
FEW_VISIBLE = 3  # ... with at most this many visible is mostly hidden
PCK_THRESHOLD = 0.1
LABELS = {
    "realistic": "realistic (anny bodies, path traced)",
    "photo": "realistic, photo-like scenes (lying rare, most people facing the camera)",
    "simple": "realistic, simple scenes (standing/walking, whole body in view, no occluders)",
    "capsule": "same-pose ablation (capsules on the anny skeletons, same scenes and renderer)",
    "procedural": "procedural generator (its own capsule people, poses and cameras)",
}


def parse_conditions(text: str, n: int) -> list[tuple[str, tuple[int, int], int]]:
    """``realistic:256x192,capsule:512x384:24`` -> [(name, (H, W), images), ...] (``n`` images unless
    given); errors name ``--conditions``."""
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, *rest = item.split(":")
        if name not in CONDITIONS:
            raise ValueError(f"--conditions {item!r}: unknown condition {name!r}; "
                             f"expected one of {', '.join(CONDITIONS)}")
        try:
            if len(rest) > 2:
                raise ValueError
            h, w = (int(v) for v in (rest[0] if rest else "256x192").lower().split("x"))
            count = int(rest[1]) if len(rest) == 2 else n
        except ValueError:
            raise ValueError(f"--conditions {item!r}: expected NAME[:HxW[:N]], "
                             "e.g. realistic:256x192:64") from None
        if count < 1:
            raise ValueError(f"--conditions {item!r}: at least one image")
        out.append((name, (h, w), count))
    if not out:
        raise ValueError("--conditions: name at least one condition")
    return out


def previous_rows(path: str | None) -> dict | None:
    """The conditions of an earlier measurement file (with its commit and date), or None."""
    if not path:
        return None

    rec = read_measurement(path)
    keep = ("condition", "size", "n_images", "n_people", "missed_people", "body_AP", "PCK@0.1",
            "images_nobody_found", "pose_mask_person_IoU", "selfie_mask_person_IoU")
    return {"commit": rec["commit"], "date": rec["date"], "command": rec["command"],
            "conditions": [{k: row[k] for k in keep} for row in rec["numbers"]["conditions"]]}


def render_condition(name: str, out: Path, n: int, seed: int, hw: tuple[int, int], settings,
                     workers: int = 1) -> float:
    """Render the split of one condition into ``out`` (kept if already there); seconds spent."""
    if (out / "split.json").is_file():
        return 0.0
    start = time.monotonic()
    if name == "procedural":
        generate_split(out, n=n, seed=seed, size=hw, workers=workers)
    elif name in ("realistic", "photo", "simple"):
        scenes = settings.scenes if name == "realistic" else name
        generate_split(out, n=n, seed=seed, size=hw, workers=workers,
                       generator=replace(settings, scenes=scenes))
    else:  # the ablation swaps bodies inside this process: one worker

        with capsule_scenes():
            generate_split(out, n=n, seed=seed, size=hw, workers=1, generator=settings)
    return time.monotonic() - start


class RecordingSystem:
    """A MediaPipe system that remembers each pose result, in call order."""

    def __init__(self, system):
        self.system = system
        self.results = []

    def pose(self, image):
        res = self.system.pose(image)
        self.results.append(res)
        return res


def pck_of_crops(split: Path, results: list, crop_hw: tuple[int, int]) -> dict:
    """PCK@0.1 of the COCO-17 visible GT points from the recorded per-person results.

    A point is a hit when its distance to the GT is below 0.1 x max(w, h) of the GT box; a person
    MediaPipe missed counts each of its visible points as a miss (``pck``) and is left out of
    ``pck_detected``.
    """

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    if len(results) != len(ds.anns):
        raise RuntimeError(f"{split}: {len(results)} MediaPipe results for {len(ds.anns)} persons")
    vids = M.vocabulary_ids()[:COCO17]
    hits = counted = hits_detected = counted_detected = 0
    for i, res in enumerate(results):
        ann = ds.anns[i]
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids]
        visible = gt[:, 2] == 2
        counted += int(visible.sum())
        if res is None:
            continue
        img_xy = image_points(ds, i, res)
        side = max(float(ann["bbox"][2]), float(ann["bbox"][3]))
        hit = (np.linalg.norm(img_xy - gt[:, :2], axis=1) < PCK_THRESHOLD * side) & visible
        hits += int(hit.sum())
        hits_detected += int(hit.sum())
        counted_detected += int(visible.sum())
    return {"pck": hits / counted if counted else float("nan"),
            "pck_detected": hits_detected / counted_detected if counted_detected else float("nan"),
            "visible_points": counted}


def person_groups(split: Path, crop_hw: tuple[int, int]) -> dict[str, list[int]]:
    """Persons (pose annotation indices) by what makes them hard, for the breakdown of misses.

    ``cut``: at most :data:`FEW_LABELLED` of the 17 COCO body points labelled (cut by the image
    border); ``lying``: the person box wider than tall (and not cut); ``hidden``: at most
    :data:`FEW_VISIBLE` of its labelled points visible (occluded, and neither cut nor lying);
    ``clear``: the rest.
    """

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    vids = M.vocabulary_ids()[:COCO17]
    groups: dict[str, list[int]] = {"cut": [], "lying": [], "hidden": [], "clear": []}
    for i, ann in enumerate(ds.anns):
        v = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids][:, 2]
        if (v > 0).sum() <= FEW_LABELLED:
            groups["cut"].append(i)
        elif ann["bbox"][2] > ann["bbox"][3]:
            groups["lying"].append(i)
        elif (v == 2).sum() <= FEW_VISIBLE:
            groups["hidden"].append(i)
        else:
            groups["clear"].append(i)
    return groups


def subset_body_ap(split: Path, crop_hw: tuple[int, int], results: list, keep: list[int]) -> float:
    """Body AP over the persons ``keep`` only (their GT and their own top-down predictions)."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    keep_ids = {ds.anns[i]["id"] for i in keep}
    images = {ds.anns[i]["image_id"] for i in keep}
    gt = M.shared_gt(ds.coco, [a for a in ds.anns if a["id"] in keep_ids], images)
    ev = PoseEvaluator(meta=M.shared_meta(), gt=gt)
    fed = 0
    for i in keep:
        if results[i] is None:
            continue
        s = ds[i]
        kps, scores = results[i].shared()
        ev.update(kps[None], scores[None], [s["image_id"]], index=[i], bbox_scores=[s["bbox_score"]],
                  areas=[s["area"]], affine=s["crop"]["inv_affine"][None])
        fed += 1
    return float(ev.compute()["body/AP"]) if fed else 0.0


def breakdown(split: Path, crop_hw: tuple[int, int], results: list) -> dict:
    """Per group of :func:`person_groups`: persons, persons missed, and the group's body AP."""
    out = {}
    for name, members in person_groups(split, crop_hw).items():
        ap = round(subset_body_ap(split, crop_hw, results, members), 4) if members else None
        missed = sum(results[i] is None for i in members)
        out[name] = {"people": len(members), "missed": missed, "body_AP": ap}
    return out


def keypoint_errors(split: Path, crop_hw: tuple[int, int], results: list) -> dict[str, dict]:
    """Per COCO-17 point: median distance to the GT over sqrt(GT area) (the OKS scale) of the detected
    persons' labelled points, the point's OKS sigma, and the OKS of a point that far off."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    meta = M.shared_meta()
    vids = M.vocabulary_ids()[:COCO17]
    errors: list[list[float]] = [[] for _ in range(COCO17)]
    for i, res in enumerate(results):
        ann = ds.anns[i]
        if res is None or not ann.get("area"):
            continue
        gt = np.asarray(ann["keypoints"], float).reshape(-1, 3)[vids]
        xy = image_points(ds, i, res)
        d = np.linalg.norm(xy - gt[:, :2], axis=1) / np.sqrt(float(ann["area"]))
        for k in np.nonzero(gt[:, 2] > 0)[0]:
            errors[k].append(float(d[k]))
    out = {}
    for k in range(COCO17):
        sigma = float(meta["sigmas"][k])
        med = float(np.median(errors[k])) if errors[k] else None
        oks = None if med is None else round(float(np.exp(-med**2 / (2 * (2 * sigma) ** 2))), 3)
        out[meta["keypoints"][k]] = {"points": len(errors[k]), "sigma": sigma, "oks_at_median": oks,
                                     "median_error": None if med is None else round(med, 4)}
    return out


def wrong_person_share(split: Path, crop_hw: tuple[int, int], results: list) -> dict:
    """How many detected persons MediaPipe read off another person in their crop.

    A detection counts as the wrong person when its COCO-17 OKS (the evaluator's
    :func:`~evaluators.pose.oks.oks_pairs`) against another GT person of the same image is higher
    than against its own GT person (a top-down single-person model given a crop that holds two
    people picks one of them).
    """
    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    sigmas = np.asarray(M.shared_meta()["sigmas"][:COCO17], float)
    vids = M.vocabulary_ids()[:COCO17]
    by_image: dict = {}
    for ann in ds.anns:
        by_image.setdefault(ann["image_id"], []).append(ann)
    detected = wrong = 0
    for i, res in enumerate(results):
        if res is None:
            continue
        ann = ds.anns[i]
        others = [o for o in by_image[ann["image_id"]] if o["id"] != ann["id"]]
        detected += 1
        if not others:
            continue
        people = [ann, *others]
        gt = np.stack([np.asarray(p["keypoints"], float).reshape(-1, 3)[vids] for p in people])
        xy = image_points(ds, i, res)[None]
        oks = oks_pairs(np.zeros(len(people), int), np.arange(len(people)), xy[..., 0], xy[..., 1],
                        gt[..., 0], gt[..., 1], gt[..., 2] > 0,
                        np.array([float(p["area"]) for p in people]),
                        np.array([p["bbox"] for p in people], float), sigmas)
        wrong += bool(oks[1:].max() > oks[0])
    return {"detected": detected, "wrong_person": wrong}


def image_points(ds, index: int, result) -> np.ndarray:
    """The COCO-17 points of MediaPipe's ``result`` on crop ``index`` of ``ds``, in image pixels."""
    inv = np.asarray(ds[index]["crop"]["inv_affine"], float)
    return result.shared()[0][:COCO17] @ inv[:, :2].T + inv[:, 2]


def class_census(split: Path) -> dict[str, int]:
    """In how many images of ``split`` each seg class (by name) has at least one pixel."""
    from PIL import Image

    names = [c["name"] for c in seg_classes29()["classes"]]
    counts = dict.fromkeys(names, 0)
    for png in sorted((split / "seg").glob("*.png")):
        for cid in np.unique(np.asarray(Image.open(png))):
            if cid < len(names):
                counts[names[cid]] += 1
    return counts


def evaluate_condition(split: Path, crop_hw: tuple[int, int], system) -> dict:
    """Body AP, PCK@0.1, whole-image detection rate and mask IoUs of MediaPipe on ``split``.

    The result is kept beside the split (``<split>.eval.json``) and reused while the split and the
    crop size are unchanged.
    """

    cache = split.with_name(split.name + ".eval.json")
    key = {"split": split_identity(split), "crop_hw": list(crop_hw), "version": EVAL_VERSION}
    if cache.is_file():
        kept = read_json(cache)
        if kept.get("key") == key:
            return kept["result"]

    start = time.monotonic()
    recorder = RecordingSystem(system)
    # evaluate_pose takes the crop as (w, h)
    metrics, info = M.evaluate_pose(split, recorder, None, (crop_hw[1], crop_hw[0]), progress=False)
    pck = pck_of_crops(split, recorder.results, crop_hw)
    masks, minfo = M.evaluate_masks(split, system, None, progress=False)
    n_images = int(minfo["num_images"])
    result = {
        "n_images": n_images, "n_people": int(info["num_instances"]),
        "missed_people": int(info["missed_instances"]),
        "body_AP": round(float(metrics["body/AP"]), 4), "AP_shared27": round(float(metrics["AP"]), 4),
        "PCK@0.1": round(pck["pck"], 4), "PCK@0.1_detected": round(pck["pck_detected"], 4),
        "visible_points": pck["visible_points"],
        "images_nobody_found": int(minfo["pose_no_person"]),
        "whole_image_detection_rate": round(1 - minfo["pose_no_person"] / n_images, 4),
        "pose_mask_person_IoU": round(float(masks["pose"]["per_class"]["IoU"]["person"]), 4),
        "selfie_mask_person_IoU": round(float(masks["selfie"]["per_class"]["IoU"]["person"]), 4),
        "eval_s": round(time.monotonic() - start, 1),
        "by_group": breakdown(split, crop_hw, recorder.results),
        "detections_of_another_person": wrong_person_share(split, crop_hw, recorder.results),
        "keypoint_errors": keypoint_errors(split, crop_hw, recorder.results),
        "images_with_class": class_census(split),
    }
    write_json_atomic(cache, {"key": key, "result": result})
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, help="folder for the rendered splits (reused when present)")
    p.add_argument("--n", type=int, default=64, help="images per condition (default 64)")
    p.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    p.add_argument("--conditions", default="realistic:256x192,capsule:256x192,procedural:256x192",
                   help="comma-separated NAME[:HxW[:N]] of realistic, capsule, procedural "
                        "(N images, default --n)")
    p.add_argument("--render", default="path", help="realistic image mode (default path)")
    p.add_argument("--spp", type=int, default=None, help="samples per pixel (default: the generator's)")
    p.add_argument("--people", type=int, default=None, help="people per image (default: the generator's)")
    p.add_argument("--workers", type=int, default=1, help="render processes (not for capsule)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="measurement file to write")
    p.add_argument("--previous", default=None,
                   help="an earlier measurement file (other generator defaults) to keep beside the new rows")
    p.add_argument("--previous-note", default="", help="what changed since --previous")
    args = p.parse_args(argv)
    if args.n < 1:
        raise ValueError(f"--n {args.n}: at least one image")

    conditions = parse_conditions(args.conditions, args.n)
    previous = previous_rows(args.previous)
    defaults = RealisticSettings()
    settings = RealisticSettings(mode=args.render, spp=args.spp or defaults.spp,
                                 max_people=args.people or defaults.max_people)
    settings.check()
    M.require_mediapipe()
    started = start_measurement()
    work = Path(args.work)
    rows = []
    with M.MediaPipeSystem() as system:
        for name, hw, count in conditions:
            split = work / f"{name}_{hw[0]}x{hw[1]}_n{count}_s{args.seed}"
            render_s = render_condition(name, split, count, args.seed, hw, settings, args.workers)
            row = {"condition": name, "label": LABELS[name], "size": f"{hw[0]}x{hw[1]}",
                   "render": None if name == "procedural" else replace(
                       settings, scenes=name if name in ("photo", "simple") else settings.scenes).record(),
                   "render_s": round(render_s, 1) if render_s else None,
                   **evaluate_condition(split, hw, system)}
            print({k: v for k, v in row.items() if k != "label"}, flush=True)
            rows.append(row)
    write_measurement(args.out, f"MediaPipe {M.installed_version()} on the realistic synthetic split vs the "
                      "same-pose capsule ablation and the procedural split",
                      {"conditions": rows, **({"previous": {**previous, "what_changed": args.previous_note}}
                                              if previous else {})},
                      started=started, notes=NOTES)
    print(f"wrote {args.out}")
    return 0


NOTES = ("Protocol of `system mediapipe` (docs/reference_systems.md): top-down on the GT person boxes, "
         "the crop at the image size; body AP = COCO keypoint AP of the 17 COCO body points; PCK@0.1 "
         "over the visible (v = 2) COCO-17 points, a missed person's points count as misses "
         "(PCK@0.1_detected leaves missed persons out); whole-image detection rate = share of whole images "
         "where the pose landmarker finds anybody; mask IoUs are person-vs-background IoU over all images. "
         "The capsule condition's person boxes come from the capsule bodies' own masks (they are "
         "slimmer than the anny bodies'); render_s is null for a split reused from the work folder.")


if __name__ == "__main__":
    raise SystemExit(main())
