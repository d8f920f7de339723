"""Ground truth of a task that writes its own (``TaskSpec.write_ground_truth``), from a synthetic scene
or from a split made before (imported or rendered).

A task the renderer does not know (a plug-in's depth, say) can still have ground truth in a split:
its spec's writer gets one *scene* at a time, the other tasks' ground truth of one image as arrays,
and writes its own files:

==============  ===============================================================================
``id``          the scene id (also the name its files should take)
``image_file``  the image's path, relative to the split folder (the manifest record's ``image``)
``image``       H x W x 3 uint8 RGB
``mask``        H x W bool person mask (when the split has one)
``normal``      H x W x 3 float32 camera-frame unit normals
``pointmap``    H x W x 3 float32 camera-frame points in metres; ``K``: 3 x 3 intrinsics
``albedo``      H x W x 3 float32 in [0, 1]
``label``       H x W integer body-part labels
==============  ===============================================================================

(a scene holds the keys its source has). The writer returns the task's manifest record for the scene
(``id`` and ``image`` are filled in when it leaves them out). ``data synth`` calls every registered
writer for each scene it renders (:func:`write_scene`); ``data derive SPLIT --task NAME`` calls one
for every image of an existing split (:func:`derive_task`), reading the scene through the readers
of the tasks the split has.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sapiens2.datasets.decoders import read_rgb
from sapiens2.datasets.split import available_tasks, open_split, split_info
from sapiens2.errors import DatasetError
from sapiens2.tasks import all_tasks, get_task
from sapiens2.utils_io import write_json_atomic

# the reader keys a scene takes from a split's dense readers, and how each is laid out in the scene
_MAPS = ("normal", "pointmap", "albedo")


def ground_truth_writers(skip: tuple[str, ...] = ()) -> dict:
    """``{task: writer}`` of every registered task with a ``write_ground_truth``, except ``skip``."""
    return {s.name: s.write_ground_truth for s in all_tasks() if s.write_ground_truth and s.name not in skip}


def synth_scene(sample: dict, sid: str) -> dict:
    """A rendered sample (``sapiens2.datasets.synth.scene.synth_sample``) as a scene (albedo in [0, 1])."""
    scene = {k: v for k, v in sample.items() if k != "people"}
    scene["albedo"] = sample["albedo"].astype(np.float32) / 255.0
    return {**scene, "id": sid, "image_file": f"images/{sid}.png"}


def write_scene(scene: dict, root: Path, writers: dict) -> dict[str, dict]:
    """Run each writer on one scene; returns ``{task: its manifest record}``.

    Raises:
        DatasetError: a writer returned something other than a dict (naming the task and the scene).
    """
    out = {}
    for task, writer in writers.items():
        rec = writer(scene, Path(root), scene["id"])
        if not isinstance(rec, dict):
            raise DatasetError(f"{task}: write_ground_truth returned {type(rec).__name__} for scene "
                               f"{scene['id']!r}, expected its manifest record (a dict)")
        out[task] = {"id": scene["id"], "image": scene["image_file"], **rec}
    return out


def manifest(task: str, records: list[dict]) -> dict:
    """The manifest of a derived task's records (the readers' format)."""
    return {"task": task, "format_version": 1, "records": records}


def _scenes(split_dir: Path, sources: list[str]) -> dict[str, dict]:
    """The split's scenes by id, each holding what the readers of ``sources`` give for that image."""
    scenes: dict[str, dict] = {}
    for task in sources:
        reader = open_split(split_dir, task)
        for i, rec in enumerate(reader.records):
            sample = reader[i]
            scene = scenes.setdefault(str(rec["id"]), {"id": str(rec["id"]), "image_file": rec["image"]})
            if "image" not in scene:
                scene["image"] = read_rgb(reader.path(rec, "image"), rec["id"])
            for key in _MAPS:
                if key in sample:
                    scene[key] = np.ascontiguousarray(sample[key].numpy().transpose(1, 2, 0))
            for key in ("mask", "label", "K"):
                if key in sample:
                    scene[key] = np.asarray(sample[key])
    return scenes


def derive_task(split_dir: str | os.PathLike, task: str, overwrite: bool = False) -> Path:
    """Write ``task``'s ground truth into an existing split from the other tasks' (its spec's writer).

    Returns:
        The task's new manifest file (also listed in the split's ``split.json``).

    Raises:
        DatasetError: the task has no writer, the split has it already (without ``overwrite``), or no
            dense task the scenes can be read from.
    """
    root = Path(split_dir)
    spec, info = get_task(task), split_info(root)
    if spec.write_ground_truth is None:
        raise DatasetError(f"task {task!r} has no ground-truth writer (TaskSpec.write_ground_truth)")
    if task in info["tasks"] and not overwrite:
        raise DatasetError(f"{root}: the split has {task} ground truth already (pass --overwrite)")
    sources = [t for t in available_tasks(root) if t != task and get_task(t).dense]
    if not sources:
        raise DatasetError(f"{root}: no dense task's ground truth to derive {task} from")
    scenes = _scenes(root, sources)
    records = [write_scene(scene, root, {task: spec.write_ground_truth})[task] for scene in scenes.values()]
    path = root / f"{task}.json"
    write_json_atomic(path, manifest(task, records), indent=None)
    write_json_atomic(root / "split.json", {**info, "tasks": {**info["tasks"], task: path.name}})
    return path
