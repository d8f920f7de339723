"""Reproduce the paper's task tables (3-7): official checkpoints x official configs x test data.

Official checkpoint layout under ``--checkpoint-root``::

    pretrain/sapiens2_{size}_pretrain.safetensors   (Table 2 probing)
    pose/sapiens2_{size}_pose.safetensors           Table 3
    seg/sapiens2_{size}_seg.safetensors             Table 4
    pointmap/sapiens2_{size}_pointmap.safetensors   Table 5
    normal/sapiens2_{size}_normal.safetensors       Table 6
    albedo/sapiens2_{size}_albedo.safetensors       Table 7

with ``size`` in ``0.4b, 0.8b, 1b, 5b`` (the sizes with official task configs). Test data under
``--data-root`` is a split folder in the reader formats (``sapiens2/datasets/README.md``).

The official evaluation protocol (``protocol.kind = "eval"``): model input 1024 x 768, ImageNet
mean/std normalisation in 0-255, pose top-down on GT boxes with flip test, dense outputs resized
bilinearly to the GT. Anything else (another input size, substituted arch settings) gets its own
``protocol_id`` and is never ranked with the official numbers.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from sapiens2.utils_io import file_sha256

TABLE_TASKS = {"table3": "pose", "table4": "seg", "table5": "pointmap", "table6": "normal",
               "table7": "albedo"}
SIZES = ("0.4b", "0.8b", "1b", "5b")
OFFICIAL_INPUT = (1024, 768)
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


@dataclass
class Job:
    """One (size, task) evaluation and what it needs."""

    size: str
    task: str
    config_name: str
    checkpoint: Path

    @property
    def model_name(self) -> str:
        return f"sapiens2_{self.size}"


def checkpoint_path(root: str | Path, size: str, task: str) -> Path:
    """Where the official checkpoint of ``size`` / ``task`` goes (``task='pretrain'`` for backbones)."""
    return Path(root) / task / f"sapiens2_{size}_{task}.safetensors"


def config_name(size: str, task: str) -> str:
    """The official config name of ``size`` / ``task``."""
    from sapiens2.reference import official_task_configs
    from sapiens2.tasks import get_task

    prefix = f"sapiens2_{size}_{get_task(task).official_config_task}_"
    names = [n for n in official_task_configs() if n.startswith(prefix)]
    if not names:
        raise KeyError(f"no official {task} config for Sapiens2-{size}")
    return names[0]


def plan(task: str, checkpoint_root: str | Path | None, data_root: str | Path | None,
         sizes=SIZES) -> tuple[list[Job], list[str]]:
    """The jobs that can run, and a list of what is missing (with where it goes).

    Returns:
        (jobs with their checkpoint present, human-readable missing items).
    """
    missing: list[str] = []
    jobs: list[Job] = []
    if checkpoint_root is None:
        missing.append(f"--checkpoint-root: a folder with {task}/sapiens2_{{size}}_{task}.safetensors "
                       f"(sizes {', '.join(sizes)})")
    else:
        for size in sizes:
            path = checkpoint_path(checkpoint_root, size, task)
            if path.is_file():
                jobs.append(Job(size, task, config_name(size, task), path))
            else:
                missing.append(f"checkpoint {path} (official Sapiens2-{size.upper()} {task} model)")
    if data_root is None:
        missing.append(f"--data-root: a split folder with split.json and the {task} manifest "
                       f"(layout: sapiens2/datasets/README.md)")
    else:
        from sapiens2.datasets.split import split_info

        try:
            info = split_info(data_root)
            manifest = info["tasks"].get(task)
            if manifest is None or not (Path(data_root) / manifest).is_file():
                missing.append(f"data {Path(data_root) / (manifest or (task + '.json'))} "
                               f"({task} ground truth manifest, listed in split.json 'tasks')")
        except (ValueError, FileNotFoundError, KeyError) as e:
            missing.append(f"data {data_root}: {e}")
    return jobs, missing


def build_task_model(job: Job, arch_settings: dict | None = None, input_size=OFFICIAL_INPUT):
    """Build the official task model of ``job`` (optionally with substituted arch settings) and load it."""
    from sapiens2.models.builder import build_model, official_config
    from sapiens2.models.checkpoint import load_checkpoint

    cfg = official_config(job.config_name)
    cfg = _adapt_config(cfg, arch_settings, input_size)
    model = build_model(cfg)
    load_checkpoint(model, job.checkpoint, strict=True)
    return model.eval()


def _adapt_config(cfg: dict, arch_settings: dict | None, input_size) -> dict:
    cfg = copy.deepcopy(cfg)
    backbone = cfg["backbone"]
    if arch_settings and backbone.get("arch") in arch_settings:
        settings = dict(arch_settings[backbone["arch"]])
        backbone["arch"] = settings
        cfg["decode_head"]["in_channels"] = int(settings["embed_dims"])
        for key, value in settings.get("decode_head", {}).items():
            cfg["decode_head"][key] = value
        settings.pop("decode_head", None)
    backbone["img_size"] = list(input_size)
    return cfg


def protocol_for(input_size, arch_settings: dict | None) -> dict:
    """``{"kind": "eval"}`` for the official protocol, with a ``protocol_id`` for any deviation."""
    if tuple(input_size) == OFFICIAL_INPUT and not arch_settings:
        return {"kind": "eval", "description": "official protocol (1024x768, flip test for pose, GT boxes)"}
    blob = json.dumps({"input_size": list(input_size), "arch_settings": arch_settings}, sort_keys=True)
    pid = f"eval-custom-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"
    return {"kind": "eval", "protocol_id": pid,
            "description": f"official models at input {input_size[0]}x{input_size[1]}"
                           + (" with substituted arch settings" if arch_settings else "")}


def evaluate_job(job: Job, data_root, out_dir, arch_settings=None, input_size=OFFICIAL_INPUT,
                 batch_size: int = 2, max_samples: int = 0, device: str = "cpu") -> Path:
    """Evaluate one official model on the test split and write its result record.

    Returns:
        The record path ``out_dir/<model>/<task>.json``.
    """
    import torch

    from benchmarks.reproduce.evaluate import updates
    from evaluators.registry import build_evaluator
    from evaluators.runner import run_evaluation
    from leaderboard.results import dataset_content_hash, make_record, write_record
    from sapiens2.datasets.split import open_split, split_info

    t0 = time.perf_counter()
    model = build_task_model(job, arch_settings, input_size).to(device)
    load_s = time.perf_counter() - t0
    kwargs = {"input_size": (input_size[1], input_size[0])} if job.task == "pose" else {}
    dataset = open_split(data_root, job.task, **kwargs)
    n = len(dataset) if not max_samples else min(max_samples, len(dataset))
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def produce():
        for start in range(0, n, batch_size):
            samples = [dataset[i] for i in range(start, min(n, start + batch_size))]
            yield from updates(job.task, model, samples, mean, std, input_size, device)

    result = run_evaluation(build_evaluator(job.task), produce(), progress=True,
                            desc=f"{job.model_name} {job.task}")
    eval_s = result.seconds
    info = split_info(data_root)
    manifest = Path(data_root) / info["tasks"][job.task]
    params = sum(p.numel() for p in model.parameters())
    rec = make_record(
        model={"name": job.model_name, "backbone": f"sapiens2_{job.size}", "params": params,
               "weights": "checkpoint",
               "checkpoint": {"path": str(job.checkpoint), "sha256": file_sha256(job.checkpoint)}},
        task=job.task,
        dataset={"name": str(info.get("name") or Path(data_root).name), "split": "test",
                 "content_hash": dataset_content_hash(manifest), "num_samples": n,
                 "root": str(data_root)},
        protocol=protocol_for(input_size, arch_settings),
        metrics=result.metrics,
        config={"config_name": job.config_name, "input_size": list(input_size),
                "arch_settings": arch_settings, "batch_size": batch_size, "max_samples": max_samples,
                "normalisation": {"mean": MEAN, "std": STD}, "flip_test": job.task == "pose"},
        seeds=[],
        timings={"load_s": load_s, "eval_s": eval_s},
        device=device,
    )
    return write_record(Path(out_dir) / job.model_name / f"{job.task}.json", rec)

