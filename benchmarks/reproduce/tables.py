"""Reproduce the paper's task tables (3-7): official checkpoints x official configs x test data.

Official checkpoint layout under ``--checkpoint-root``::

    pretrain/sapiens2_{size}_pretrain.safetensors   (Table 2 probing)
    pose/sapiens2_{size}_pose.safetensors           Table 3
    seg/sapiens2_{size}_seg.safetensors             Table 4
    pointmap/sapiens2_{size}_pointmap.safetensors   Table 5
    normal/sapiens2_{size}_normal.safetensors       Table 6
    albedo/sapiens2_{size}_albedo.safetensors       Table 7

with ``size`` in ``0.4b, 0.8b, 1b, 5b`` (the sizes with official task configs), and ``1b_4k`` for the
1B-4K rows of Tables 4 (seg) and 6 (normal): ``seg/sapiens2_1b_4k_seg.safetensors``,
``normal/sapiens2_1b_4k_normal.safetensors``, ``pretrain/sapiens2_1b_4k_pretrain.safetensors`` (on the
command line the size is spelled ``1b-4k``). Where the files come from: ``benchmarks/reproduce/sources.py``
and ``sapiens2-bench download``. Test data under ``--data-root`` is a split folder in the reader formats
(``sapiens2/datasets/README.md``).

The 1B-4K task models have no published config: the paper says only that 1B-4K was fine-tuned for
segmentation and normals and decodes to 2K. :func:`task_config` derives one from the 1B config with the
official 1B-4K backbone (4x4-window tokenizer, 4096 x 3072 input) and the 1B head unchanged; a checkpoint
whose head differs fails the strict load with the list of differing keys, never silently.

The official evaluation protocol (``protocol.kind = "eval"``): model input 1024 x 768, ImageNet
mean/std normalisation in 0-255, pose top-down on GT boxes with flip test, dense outputs resized
bilinearly to the GT. Anything else (another input size, substituted arch settings) gets its own
``protocol_id`` and is never ranked with the official numbers. So does every measurement on data: the
paper's test sets are in-house, so a record says what it was measured on ("measured on N images of
DIR", with the first-N cut of ``--max-samples``) and its protocol id carries that data's content hash
and N; it sits in a table of its own, never inside a paper table, and gets no delta to the paper.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.reproduce.evaluate import updates, vocabulary_adapter
from benchmarks.reproduce.sources import repo_for
from benchmarks.reproduce.table_rows import (  # noqa: F401  (the tables' rows, re-exported)
    INPUT_4K,
    OFFICIAL_INPUT,
    SIZE_4K,
    SIZES,
    TABLE_TASKS,
    TASKS_4K,
    table_sizes,
)
from evaluators.metric_decl import record_declarations
from evaluators.registry import build_evaluator
from evaluators.runner import run_evaluation
from sapiens2.datasets.identity import split_identity
from sapiens2.datasets.split import open_split, split_info
from sapiens2.errors import BenchError
from sapiens2.models.builder import build_model, official_config
from sapiens2.models.checkpoint import load_checkpoint
from sapiens2.records.paths import public_path
from sapiens2.records.results import flatten_metrics, make_record, write_record
from sapiens2.reference import official_task_configs
from sapiens2.tasks import get_task
from sapiens2.utils_io import atomic_write, file_sha256

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
        return f"sapiens2_{size_key(self.size)}"


def size_key(size: str) -> str:
    """The size as it appears in arch, model and file names (``'1b-4k'`` -> ``'1b_4k'``).

    Example:
        >>> size_key("1B-4K"), size_key("0.4b")
        ('1b_4k', '0.4b')
    """
    return size.strip().lower().replace("-", "_")


def is_4k(size: str) -> bool:
    """Whether ``size`` names the 1B-4K model."""
    return size_key(size) == size_key(SIZE_4K)


def official_input(size: str) -> tuple[int, int]:
    """The model input (H, W) of the official protocol for ``size`` (1B-4K: 4096 x 3072)."""
    return INPUT_4K if is_4k(size) else OFFICIAL_INPUT


def checkpoint_path(root: str | Path, size: str, task: str) -> Path:
    """Where the official checkpoint of ``size`` / ``task`` goes (``task='pretrain'`` for backbones).

    Example:
        >>> checkpoint_path("ckpts", "1b-4k", "seg").as_posix()
        'ckpts/seg/sapiens2_1b_4k_seg.safetensors'
    """
    return Path(root) / task / f"sapiens2_{size_key(size)}_{task}.safetensors"


def config_name(size: str, task: str) -> str:
    """The official config name of ``size`` / ``task`` (1B-4K: the 1B config it is derived from, marked)."""
    if is_4k(size):
        return f"{config_name('1b', task)} + sapiens2_1b_4k backbone (derived; no published 1B-4K config)"

    prefix = f"sapiens2_{size}_{get_task(task).official_config_task}_"
    names = [n for n in official_task_configs() if n.startswith(prefix)]
    if not names:
        raise KeyError(f"no official {task} config for Sapiens2-{size}")
    return names[0]


def task_config(size: str, task: str) -> dict:
    """The model config of ``size`` / ``task``: the official one, or for 1B-4K the derived one."""
    if not is_4k(size):
        return official_config(config_name(size, task))
    if task not in TASKS_4K:
        raise KeyError(f"no 1B-4K {task} model: the paper fine-tuned 1B-4K only for "
                       f"{' and '.join(TASKS_4K)} (Tables 4 and 6)")
    cfg = official_config(config_name("1b", task))
    cfg["backbone"].update(arch="sapiens2_1b", use_tokenizer=True, img_size=list(INPUT_4K))
    return cfg


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
                       f"(sizes {', '.join(size_key(s) for s in sizes)}; `sapiens2-bench download` fetches "
                       "the public ones)")
    else:
        for size in sizes:
            path = checkpoint_path(checkpoint_root, size, task)
            if path.is_file():
                jobs.append(Job(size, task, config_name(size, task), path))
            else:
                missing.append(f"checkpoint {path} (official Sapiens2-{size.upper()} {task} model; "
                               f"{_source_hint(task, size)})")
    if data_root is None:
        missing.append(f"--data-root: a split folder with split.json and the {task} manifest "
                       f"(layout: sapiens2/datasets/README.md)")
    else:
        try:
            info = split_info(data_root)
            manifest = info["tasks"].get(task)
            if manifest is None or not (Path(data_root) / manifest).is_file():
                missing.append(f"data {Path(data_root) / (manifest or (task + '.json'))} "
                               f"({task} ground truth manifest, listed in split.json 'tasks')")
        except (ValueError, FileNotFoundError, KeyError) as e:
            missing.append(f"data {data_root}: {e}")
    return jobs, missing


def _source_hint(task: str, size: str) -> str:
    try:
        return f"from https://huggingface.co/{repo_for(task, size)}"
    except BenchError:
        return "no public repository is known: place it by hand"


def build_task_model(job: Job, arch_settings: dict | None = None, input_size=None):
    """Build the task model of ``job`` (optionally with substituted arch settings) and load it."""
    cfg = task_config(job.size, job.task)
    cfg = _adapt_config(cfg, arch_settings, input_size or official_input(job.size),
                        arch_key=f"sapiens2_{size_key(job.size)}")
    model = build_model(cfg)
    load_checkpoint(model, job.checkpoint, strict=True)
    return model.eval()


def random_checkpoint(root, size: str, task: str, arch_settings: dict | None = None, input_size=None,
                      seed: int = 0) -> Path:
    """Write a seeded random-weights checkpoint of the ``size``/``task`` model where ``reproduce`` reads it.

    For trying the reproduce pipeline without the official files (its numbers mean nothing). Built with
    the public :func:`sapiens2.models.builder.build_model` from the task's official config; pass the same
    ``arch_settings`` (``{"sapiens2_<size>": {...}}``) to ``reproduce --arch-settings``.

    Returns:
        The checkpoint path (``checkpoint_path(root, size, task)``).
    """
    import torch
    from safetensors.torch import save_file

    cfg = copy.deepcopy(task_config(size, task))
    cfg["backbone"]["img_size"] = list(input_size or official_input(size))
    torch.manual_seed(seed)
    model = build_model(cfg, arch_settings=arch_settings)
    path = checkpoint_path(root, size, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    meta = {"format": "pt", "weights": f"random(seed={seed})"}
    atomic_write(path, lambda tmp: save_file(state, tmp, metadata=meta))
    return path


def _adapt_config(cfg: dict, arch_settings: dict | None, input_size, arch_key: str | None = None) -> dict:
    """Copy of ``cfg`` at ``input_size`` with the settings of ``arch_key`` (else of its arch) substituted."""
    cfg = copy.deepcopy(cfg)
    backbone = cfg["backbone"]
    key = arch_key if arch_settings and arch_key in arch_settings else backbone.get("arch")
    if arch_settings and key in arch_settings:
        settings = dict(arch_settings[key])
        backbone["arch"] = settings
        cfg["decode_head"]["in_channels"] = int(settings["embed_dims"])
        for key, value in settings.get("decode_head", {}).items():
            cfg["decode_head"][key] = value
        settings.pop("decode_head", None)
    backbone["img_size"] = list(input_size)
    return cfg


def protocol_for(input_size, arch_settings: dict | None, size: str | None = None,
                 data: dict | None = None) -> dict:
    """The protocol of a reproduce record.

    Args:
        input_size: model input (H, W).
        arch_settings: substituted arch settings, or None.
        size: the model size (its official input is the reference).
        data: what was measured: ``{"root", "content_hash", "n", "total"}`` (``n`` images used of the
            split's ``total``). None: the protocol alone (``{"kind": "eval"}`` when official).

    Returns:
        ``{"kind": "eval", "description": ...}``, plus a ``protocol_id`` for a deviation from the official
        setup (``eval-custom-...``) and for any measured data (``eval-data-...``): the paper's test sets
        are in-house, so a measurement is never the paper's protocol.

    Example:
        >>> data = {"root": "d", "content_hash": "ab", "n": 2, "total": 9}
        >>> p = protocol_for((1024, 768), None, "0.4b", data)
        >>> p["protocol_id"][:10], p["description"]
        ('eval-data-', 'official models and protocol, measured on 2 images of d (the first 2 of 9)')
    """
    official = official_input(size or SIZES[0])
    custom = tuple(input_size) != official or bool(arch_settings)
    if not custom:
        desc = f"official protocol ({official[0]}x{official[1]}, flip test for pose, GT boxes)"
    else:
        desc = f"official models at input {input_size[0]}x{input_size[1]}" + (
            " with substituted arch settings" if arch_settings else "")
    if data is None and not custom:
        return {"kind": "eval", "description": desc}
    ident = {"input_size": list(input_size), "arch_settings": arch_settings}
    if data is not None:
        ident["data"] = {"content_hash": data.get("content_hash"), "n": int(data["n"])}
        cut = f" (the first {data['n']} of {data['total']})" if int(data["n"]) < int(data["total"]) else ""
        desc = (desc if custom else "official models and protocol") + (
            f", measured on {data['n']} images of {data['root']}{cut}")
    blob = json.dumps(ident, sort_keys=True)
    pid = f"eval-{'custom' if custom else 'data'}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"
    return {"kind": "eval", "protocol_id": pid, "description": desc}


def evaluate_job(job: Job, data_root, out_dir, arch_settings=None, input_size=None,
                 batch_size: int = 2, max_samples: int = 0, device: str = "cpu") -> Path:
    """Evaluate one official model on the test split and write its result record.

    ``input_size`` None: the official input of the job's size (:func:`official_input`).

    Returns:
        The record path ``out_dir/<model>/<task>.json``.
    """
    import torch

    input_size = tuple(input_size or official_input(job.size))
    t0 = time.perf_counter()
    model = build_task_model(job, arch_settings, input_size).to(device)
    load_s = time.perf_counter() - t0
    # a keypoint task's reader cuts top-down crops at the input size
    crops = get_task(job.task).feed.kind == "keypoints"
    kwargs = {"input_size": (input_size[1], input_size[0])} if crops else {}
    dataset = open_split(data_root, job.task, **kwargs)
    n = len(dataset) if not max_samples else min(max_samples, len(dataset))
    ev_kwargs, pred_map = vocabulary_adapter(job.task, dataset)
    evaluator = build_evaluator(job.task, **ev_kwargs)
    if pred_map is not None:
        evaluator.conventions["vocabulary_map"] = (
            f"model {pred_map.source} -> split {pred_map.target} (declared map)"
        )
    if getattr(dataset, "area_source", None):  # where the GT areas (OKS scale) come from
        evaluator.conventions["gt_area"] = dataset.area_source
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def produce():
        for start in range(0, n, batch_size):
            samples = [dataset[i] for i in range(start, min(n, start + batch_size))]
            yield from updates(job.task, model, samples, mean, std, input_size, device, pred_map)

    result = run_evaluation(evaluator, produce(), progress=True,
                            desc=f"{job.model_name} {job.task}")
    eval_s = result.seconds
    info = split_info(data_root)
    data_id = split_identity(data_root)  # the split's files and the photos its manifests name
    params = sum(p.numel() for p in model.parameters())
    rec = make_record(
        model={"name": job.model_name, "backbone": job.model_name, "params": params,
               "weights": "checkpoint",
               "checkpoint": {"path": public_path(job.checkpoint), "sha256": file_sha256(job.checkpoint)}},
        task=job.task,
        dataset={"name": str(info.get("name") or Path(data_root).name), "split": "test",
                 "content_hash": data_id, "num_samples": n,
                 "root": public_path(data_root)},
        protocol=protocol_for(input_size, arch_settings, job.size,
                              {"root": public_path(data_root), "content_hash": data_id, "n": n,
                               "total": len(dataset)}),
        metrics=result.metrics,
        config={"config_name": job.config_name, "input_size": list(input_size),
                "arch_settings": arch_settings, "batch_size": batch_size, "max_samples": max_samples,
                "normalisation": {"mean": MEAN, "std": STD}, "flip_test": job.task == "pose"},
        seeds=[],
        timings={"load_s": load_s, "eval_s": eval_s},
        device=device,
        metric_decls=record_declarations(evaluator.declared_metrics(), flatten_metrics(result.metrics)[0],
                                         get_task(job.task).headline),
    )
    return write_record(Path(out_dir) / job.model_name / f"{job.task}.json", rec)

