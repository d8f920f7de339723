"""How real do the synthetic people look to a real pretrained model? MediaPipe on several conditions.

Conditions (each a split rendered with one seed, scored by ``system mediapipe``'s protocol):

- a scene mix of the realistic generator (anny bodies, Mitsuba path tracing), by its name
  (:data:`sapiens2.datasets.synth.realistic.mixes.SCENE_MIXES`: ``default`` is the benchmark's
  scenes, the others controls that each make one respect of them easier; ``realistic`` is a
  synonym of ``default``);
- ``capsule``: the same-pose ablation: the very default scenes (poses, cameras, occluders, lights,
  colours, classes, keypoints) with each anny body replaced by capsules along its skeleton
  (:mod:`benchmarks.analysis.capsule_people`), same renderer;
- ``procedural``: the procedural generator (ray-cast capsule/ellipsoid people) at the same size,
  seed and image count; its scene settings are its own (``procedural_settings`` is the realistic
  generator under them).

A condition may name its samples per pixel (``default@16``; default: ``--spp``). Measured per
condition: body AP (COCO-17 of the shared keypoints, GT boxes) with its 95 % bootstrap interval over
images, PCK@0.1 of the COCO-17 visible points (a person MediaPipe misses counts as all misses), the
share of whole images in which the pose landmarker finds nobody, the person-mask IoU of the pose
landmarker's mask and of the selfie segmenter, and the per-person breakdown of
:mod:`benchmarks.analysis.realism_breakdown`. The result goes to a measurement file (command,
commit, machine, date, load).

Usage::
    python -m benchmarks.analysis.realism_mediapipe --work /tmp/realism --n 64 \\
        --conditions default,default@16,capsule,procedural,procedural_settings
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchmarks.analysis.capsule_people import capsule_scenes
from benchmarks.analysis.realism_breakdown import (
    breakdown,
    class_census,
    keypoint_errors,
    pck_of_crops,
    wrong_person_share,
)
from benchmarks.results import start_measurement, write_measurement
from benchmarks.systems import mediapipe_system as M
from evaluators.bootstrap import percentile_interval
from sapiens2.datasets.identity import split_identity
from sapiens2.datasets.synth.realistic.mixes import SCENE_MIXES, SCENES
from sapiens2.datasets.synth.realistic.sample import MAX_SPP, RealisticSettings
from sapiens2.datasets.synth.writer import generate_split
from sapiens2.utils_io import read_json, write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "references" / "mediapipe_realistic.json"
SYNONYMS = {"realistic": "default"}
CONDITIONS = (*SCENES, "capsule", "procedural", *SYNONYMS)
EVAL_VERSION = 6  # bump when evaluate_condition's result changes (kept results are then remade)
INTERVAL_RESAMPLES = 1000  # bootstrap resamples of the images for the body AP's 95 % interval
LABELS = {
    "capsule": "same-pose ablation: capsules on the anny skeletons of the default scenes",
    "procedural": "procedural generator (its own capsule people and scene settings)",
}


@dataclass(frozen=True)
class Condition:
    """One measured condition: what is rendered, at which size, how many images, at which spp."""

    name: str  # a scene mix name, "capsule" or "procedural"
    hw: tuple[int, int] = (256, 192)
    count: int = 64
    spp: int | None = None  # None: the run's --spp (not for procedural)

    @property
    def key(self) -> str:
        """The condition as a row names it: ``name`` or ``name@spp``."""
        return self.name if self.spp is None else f"{self.name}@{self.spp}"

    def label(self) -> str:
        """A few words on what the condition holds."""
        return LABELS.get(self.name) or f"realistic, {self.name} scenes: {SCENE_MIXES[self.name].summary}"


def parse_conditions(text: str, n: int) -> list[Condition]:
    """``default,photo@16:512x384:24`` -> conditions (``n`` images and 256x192 unless given); errors
    name ``--conditions``."""
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        head, *rest = item.split(":")
        name, _, spp_text = head.partition("@")
        name = SYNONYMS.get(name, name)
        if name not in CONDITIONS:
            raise ValueError(f"--conditions {item!r}: unknown condition {name!r}; "
                             f"expected one of {', '.join(CONDITIONS)}")
        try:
            if len(rest) > 2:
                raise ValueError
            h, w = (int(v) for v in (rest[0] if rest else "256x192").lower().split("x"))
            count = int(rest[1]) if len(rest) == 2 else n
            spp = int(spp_text) if spp_text else None
        except ValueError:
            raise ValueError(f"--conditions {item!r}: expected NAME[@SPP][:HxW[:N]], "
                             "e.g. default@16:256x192:64") from None
        if count < 1:
            raise ValueError(f"--conditions {item!r}: at least one image")
        if spp is not None and (name == "procedural" or not 1 <= spp <= MAX_SPP):
            raise ValueError(f"--conditions {item!r}: samples per pixel 1..{MAX_SPP}, "
                             "for the realistic conditions only")
        out.append(Condition(name, (h, w), count, spp))
    if not out:
        raise ValueError("--conditions: name at least one condition")
    return out


def split_folder(work: Path, key: str, size: str, count: int, seed: int) -> Path:
    """Where the split of condition ``key`` (``name`` or ``name@spp``) at ``size`` ("HxW") is kept."""
    return work / f"{key.replace('@', '-spp')}_{size}_n{count}_s{seed}"


def condition_settings(cond: Condition, base: RealisticSettings) -> RealisticSettings | None:
    """The realistic generator's settings of ``cond`` (None for the procedural generator)."""
    scenes = _scenes_of(cond)
    return None if scenes is None else replace(base, scenes=scenes, spp=cond.spp or base.spp)


def render_condition(cond: Condition, out: Path, seed: int, base: RealisticSettings,
                     workers: int = 1) -> float:
    """Render the split of one condition into ``out`` (kept if already there); seconds spent."""
    if (out / "split.json").is_file():
        return 0.0
    start = time.monotonic()
    settings = condition_settings(cond, base)
    if settings is None:
        generate_split(out, n=cond.count, seed=seed, size=cond.hw, workers=workers)
    elif cond.name != "capsule":
        generate_split(out, n=cond.count, seed=seed, size=cond.hw, workers=workers, generator=settings)
    else:  # the ablation swaps bodies inside this process: one worker
        with capsule_scenes():
            generate_split(out, n=cond.count, seed=seed, size=cond.hw, workers=1, generator=settings)
    return time.monotonic() - start


def evaluate_condition(split: Path, crop_hw: tuple[int, int], system) -> tuple[dict, list[float]]:
    """Body AP, PCK@0.1, whole-image detection rate and mask IoUs of MediaPipe on ``split``.

    The result is kept beside the split (``<split>.eval.json``) and reused while the split and the
    crop size are unchanged.

    Returns:
        (the condition's row, its body AP on each of :data:`INTERVAL_RESAMPLES` bootstrap resamples
        of the images: resample ``r`` draws the same image positions for every split of the same
        image count, so two conditions of the same scenes can be compared paired).
    """

    cache = split.with_name(split.name + ".eval.json")
    key = {"split": split_identity(split), "crop_hw": list(crop_hw), "version": EVAL_VERSION}
    if cache.is_file():
        kept = read_json(cache)
        if kept.get("key") == key:
            return kept["result"], kept["body_AP_resampled"]

    start = time.monotonic()
    recorder = M.RecordingSystem(system)
    # evaluate_pose takes the crop as (w, h)
    metrics, info = M.evaluate_pose(split, recorder, None, (crop_hw[1], crop_hw[0]), progress=False)
    pck = pck_of_crops(split, recorder.results, crop_hw)
    masks, minfo = M.evaluate_masks(split, system, None, progress=False)
    n_images = int(minfo["num_images"])
    resampled = info["evaluator"].bootstrap_distribution(["body/AP"], resamples=INTERVAL_RESAMPLES,
                                                         seed=0)["body/AP"]
    result = {
        "n_images": n_images, "n_people": int(info["num_instances"]),
        "missed_people": int(info["missed_instances"]),
        "body_AP": round(float(metrics["body/AP"]), 4),
        "body_AP_95": [round(v, 4) for v in percentile_interval(resampled)],
        "AP_shared27": round(float(metrics["AP"]), 4),
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
    kept = [round(float(v), 6) for v in resampled]
    write_json_atomic(cache, {"key": key, "result": result, "body_AP_resampled": kept})
    return result, kept


def paired_with_first(conditions: list[Condition], rows: list[dict],
                      resampled: list[list[float]]) -> list[dict]:
    """Body AP of each later condition of the first one's scenes minus the first's, with the 95 %
    paired bootstrap interval (same resampled images): what a change of render (samples per pixel,
    size) or of bodies (``capsule``) alone does to the same scenes."""
    ref_scenes = _scenes_of(conditions[0])
    out = []
    for cond, row, values in zip(conditions[1:], rows[1:], resampled[1:]):
        if _scenes_of(cond) != ref_scenes or row["n_images"] != rows[0]["n_images"]:
            continue
        diff = np.asarray(values, float) - np.asarray(resampled[0], float)
        out.append({"condition": row["condition"], "size": row["size"], "reference": rows[0]["condition"],
                    "difference": round(row["body_AP"] - rows[0]["body_AP"], 4),
                    "difference_95": [round(v, 4) for v in percentile_interval(diff)],
                    "n_images": row["n_images"]})
    return out


def _scenes_of(cond: Condition) -> str | None:
    """The scene mix a condition renders (the capsule ablation: the default's); None: procedural."""
    if cond.name == "procedural":
        return None
    return "default" if cond.name == "capsule" else cond.name


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, help="folder for the rendered splits (reused when present)")
    p.add_argument("--n", type=int, default=64, help="images per condition (default 64)")
    p.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    p.add_argument("--conditions", default="default,capsule,procedural",
                   help="comma-separated NAME[@SPP][:HxW[:N]]: a scene mix name "
                        f"({', '.join(SCENES)}), capsule or procedural (N images, default --n)")
    p.add_argument("--render", default="path", help="realistic image mode (default path)")
    p.add_argument("--spp", type=int, default=None, help="samples per pixel (default: the generator's)")
    p.add_argument("--people", type=int, default=None, help="people per image (default: the generator's)")
    p.add_argument("--workers", type=int, default=1, help="render processes (not for capsule)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="measurement file to write")
    args = p.parse_args(argv)
    if args.n < 1:
        raise ValueError(f"--n {args.n}: at least one image")

    conditions = parse_conditions(args.conditions, args.n)
    defaults = RealisticSettings()
    base = RealisticSettings(mode=args.render, spp=args.spp or defaults.spp,
                             max_people=args.people or defaults.max_people)
    base.check()
    M.require_mediapipe()
    started = start_measurement()
    work = Path(args.work)
    rows, resampled = [], []
    with M.MediaPipeSystem() as system:
        for cond in conditions:
            hw = cond.hw
            split = split_folder(work, cond.key, f"{hw[0]}x{hw[1]}", cond.count, args.seed)
            render_s = render_condition(cond, split, args.seed, base, args.workers)
            settings = condition_settings(cond, base)
            result, values = evaluate_condition(split, hw, system)
            resampled.append(values)
            row = {"condition": cond.key, "label": cond.label(), "size": f"{hw[0]}x{hw[1]}",
                   "render": None if settings is None else settings.record(),
                   "render_s": round(render_s, 1) if render_s else None, **result}
            brief = ("condition", "n_people", "missed_people", "body_AP", "body_AP_95", "PCK@0.1")
            print({k: row[k] for k in brief}, flush=True)
            rows.append(row)
    paired = paired_with_first(conditions, rows, resampled)
    write_measurement(args.out, f"MediaPipe {M.installed_version()} on the realistic synthetic split's scene "
                      "mixes, the same-pose capsule ablation and the procedural split",
                      {"conditions": rows, "paired_with_first": paired}, started=started, notes=NOTES)
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
