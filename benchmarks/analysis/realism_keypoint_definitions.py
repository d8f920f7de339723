"""Does the body AP of MediaPipe on the realistic split depend on where our COCO-17 points sit on the body?

The same rendered split and the same MediaPipe predictions are scored against ground truths that
differ only in the 3D definition of the 17 COCO body points:

- ``table``: the generator's own points (``sapiens2/data/anny_keypoints308.json``: nose tip vertex,
  pupil centre, ear-mask centre vertex, rig joint centres for shoulders to ankles);
- ``anny_coco``: anny's own COCO keypoint regressor (``anny.keypoints.KeypointsRegressor.coco``, a
  fixed vertex blend), on the very same posed body (the person mesh's first vertices are the bare
  body; clothes do not move it);
- ``anny_limbs_table_face`` and ``table_limbs_anny_face``: the two mixes (face = nose, eyes, ears;
  limbs = shoulders to ankles).

Each scene is redrawn from the split's seed (:func:`sapiens2.datasets.synth.realistic.sample.
realistic_scene`), its ground-truth pass rendered (no image), and its people matched to the split's
annotations in order; the table's projections must equal the split's stored points (checked). The
visibility labels are the generator's (only v > 0 counts in OKS; an anny point outside the image gets
v = 0). MediaPipe runs once per person crop (kept beside the split as ``<split>.mediapipe.npz``).

Usage::
    python -m benchmarks.analysis.realism_keypoint_definitions --split WORK/realistic_256x192_n64_s0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.results import start_measurement, write_measurement
from benchmarks.systems import mediapipe_system as M
from evaluators.pose import PoseEvaluator
from sapiens2.datasets import open_split
from sapiens2.datasets.synth.realistic.bodies import anny_model
from sapiens2.datasets.synth.realistic.render import project_keypoints, render_ground_truth
from sapiens2.datasets.synth.realistic.sample import RealisticSettings, realistic_scene, sample_rng
from sapiens2.datasets.synth.realistic.variant import load_mitsuba

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "references" / "mediapipe_keypoint_definitions.json"
COCO17 = 17
FACE = slice(0, 5)  # nose, eyes, ears; then shoulders to ankles
DEFINITIONS = ("table", "anny_coco", "anny_limbs_table_face", "table_limbs_anny_face")


def mediapipe_predictions(split: Path, crop_hw: tuple[int, int], cache: Path) -> list:
    """Per pose annotation: (27 x 2 crop keypoints, 27 scores) of MediaPipe, or None for a miss."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    if cache.is_file():
        kept = np.load(cache)
        if len(kept["found"]) == len(ds.anns):
            return [(k, s) if f else None for k, s, f in zip(kept["kps"], kept["scores"], kept["found"])]
    M.require_mediapipe()
    out = []
    with M.MediaPipeSystem() as system:
        for i in range(len(ds.anns)):
            res = system.pose(ds[i]["image"])
            out.append(None if res is None else tuple(np.asarray(a, float) for a in res.shared()))
    n = len(M.vocabulary_ids())
    np.savez(cache, found=np.array([r is not None for r in out]),
             kps=np.stack([r[0] if r else np.zeros((n, 2)) for r in out]),
             scores=np.stack([r[1] if r else np.zeros(n) for r in out]))
    return out


def redrawn_keypoints(split: Path) -> dict[int, list[dict[str, np.ndarray]]]:
    """Per image id: per person (in annotation order) the COCO-17 points (17 x 3: x, y, v) of each
    definition."""
    from anny.keypoints import KeypointsRegressor


    info = json.loads((split / "split.json").read_text(encoding="utf-8"))
    record = info["render"]
    settings = RealisticSettings(mode=record["mode"], spp=record["spp"] or 64,
                                 max_people=record["max_people"], scenes=record.get("scenes", "default"))
    hw = tuple(info["size"])
    regressor = KeypointsRegressor.coco(anny_model())
    weights = regressor.regression_weights.detach().cpu().numpy()
    names = M.shared_meta()["keypoints"][:COCO17]
    rows = [regressor.labels.index(n) for n in names]
    vids = M.vocabulary_ids()[:COCO17]
    mi = load_mitsuba()
    out = {}
    for index in range(int(info["n"])):
        scene = realistic_scene(sample_rng(info["seed"], index), hw, settings)
        gt = render_ground_truth(scene, mi)
        people = []
        for k, kp in enumerate(project_keypoints(scene, gt)):
            if not (gt["owner"] == k).any():
                continue
            table = kp[vids]
            body = scene.meshes[k].vertices[: weights.shape[1]]
            uv = scene.camera.project(scene.camera.to_camera(weights[rows] @ body))
            h, w = hw
            inside = (uv[:, 0] >= -0.5) & (uv[:, 0] < w - 0.5) & (uv[:, 1] >= -0.5) & (uv[:, 1] < h - 0.5)
            v = np.where(inside, table[:, 2], 0)
            anny = np.column_stack([np.where(v[:, None] > 0, uv, 0), v])
            limbs, face = anny.copy(), table.copy()
            limbs[FACE], face[FACE] = table[FACE], anny[FACE]
            people.append({"table": table, "anny_coco": anny, "anny_limbs_table_face": limbs,
                           "table_limbs_anny_face": face})
        out[index] = people
    return out


def score(split: Path, crop_hw: tuple[int, int], predictions: list, points: dict, definition: str) -> dict:
    """Body AP and per-point median error (over sqrt(area)) with the COCO-17 GT of ``definition``."""

    ds = open_split(split, "pose", input_size=(crop_hw[1], crop_hw[0]))
    vids = M.vocabulary_ids()[:COCO17]
    anns, seen = [], {}
    for ann in ds.anns:
        j = seen.get(ann["image_id"], 0)
        seen[ann["image_id"]] = j + 1
        kp = np.asarray(ann["keypoints"], float).reshape(-1, 3).copy()
        new = points[ann["image_id"]][j]
        if definition == "table" and not np.allclose(kp[vids, :2], new["table"][:, :2], atol=1e-3):
            raise RuntimeError(f"{split}: the redrawn scene of image {ann['image_id']} does not reproduce "
                               "the split's keypoints (another generator version?)")
        kp[vids] = new[definition]
        anns.append({**ann, "keypoints": kp.ravel().tolist()})
    images = {a["image_id"] for a in anns}
    ev = PoseEvaluator(meta=M.shared_meta(), gt=M.shared_gt(ds.coco, anns, images))
    errors = [[] for _ in range(COCO17)]
    for i, pred in enumerate(predictions):
        if pred is None:
            continue
        s = ds[i]
        inv = np.asarray(s["crop"]["inv_affine"], float)
        ev.update(pred[0][None], pred[1][None], [s["image_id"]], index=[i], bbox_scores=[s["bbox_score"]],
                  areas=[s["area"]], affine=inv[None])
        gt = np.asarray(anns[i]["keypoints"], float).reshape(-1, 3)[vids]
        xy = pred[0][:COCO17] @ inv[:, :2].T + inv[:, 2]
        d = np.linalg.norm(xy - gt[:, :2], axis=1) / np.sqrt(float(anns[i]["area"]))
        for k in np.nonzero(gt[:, 2] > 0)[0]:
            errors[k].append(float(d[k]))
    names = M.shared_meta()["keypoints"][:COCO17]
    return {"body_AP": round(float(ev.compute()["body/AP"]), 4),
            "median_error": {n: round(float(np.median(e)), 4) for n, e in zip(names, errors) if e}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--split", required=True, help="a rendered realistic split (its seed redraws the scenes)")
    p.add_argument("--crop", default="256x192", help="crop HxW (default 256x192)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="measurement file to write")
    p.add_argument("--cache", default=None, help="MediaPipe predictions file (default: beside the split)")
    args = p.parse_args(argv)
    split = Path(args.split)
    if not (split / "split.json").is_file():
        raise FileNotFoundError(f"--split {split}: no split.json there")
    crop_hw = tuple(int(v) for v in args.crop.lower().split("x"))
    started = start_measurement()
    cache = Path(args.cache) if args.cache else split.with_name(split.name + ".mediapipe.npz")
    predictions = mediapipe_predictions(split, crop_hw, cache)
    points = redrawn_keypoints(split)
    rows = {d: score(split, crop_hw, predictions, points, d) for d in DEFINITIONS}
    n_people = len(predictions)
    result = {"split": split.name, "n_images": len(points), "n_people": n_people,
              "missed_people": sum(r is None for r in predictions), "definitions": rows}
    print(json.dumps(result, indent=1))
    write_measurement(args.out, "MediaPipe body AP on one realistic split under several COCO-17 keypoint "
                      "definitions (same images, same predictions)", result, started=started,
                      notes="The ground truth differs only in the 3D points of the 17 COCO body points; "
                            "missed persons count as in the realism measurement (GT boxes, top-down).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
