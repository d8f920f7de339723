"""The pretraining loop: config -> checks -> (resume) -> steps -> checkpoints -> backbone export.

Everything that can be wrong with the input (no images, an unknown arch or type, crop sizes the
backbone cannot take, a checkpoint of another config or other images) is reported before the first
step. A run's identity (config hash, seed, SHA-256 of its images) is written into ``config.json``,
the training state and the backbone card, and its key on every log row; one run at a time holds the
output folder (:mod:`sapiens2.output_lock`). A non-finite gradient stops the run before the update,
and a non-finite state is never checkpointed.
Under ``torchrun`` the student is wrapped in DistributedDataParallel (gloo on CPU, NCCL on CUDA;
the caller sets up the process group, see :func:`sapiens2.distributed.process_group`); rank 0
writes the files.

Example:
    ``pretrain(get_recipe("smoke_tiny"), "data/", "out/")`` then
    ``load_checkpoint(build_model(card["backbone_config"]), "out/backbone.safetensors")``.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sapiens2 import distributed as dist_utils
from sapiens2.errors import BenchError
from sapiens2.output_lock import output_lock
from sapiens2.pretrain.crops import MultiCrop
from sapiens2.pretrain.data import StepBatches, images_sha256, list_images, read_image
from sapiens2.pretrain.distill import teacher_temperature
from sapiens2.pretrain.encoder import token_grid
from sapiens2.pretrain.optim import build_optimizer, lr_at, set_lr
from sapiens2.pretrain.recipes import config_hash, resolve_config
from sapiens2.pretrain.registry import build
from sapiens2.pretrain.state import STATE_FILE, check_run, export_backbone, load_state, run_key, save_state
from sapiens2.pretrain.synthdata import ensure_unlabelled
from sapiens2.utils_io import write_json_atomic

LOG_FILE = "log.jsonl"


@dataclass
class PretrainResult:
    """What :func:`pretrain` did.

    Attributes:
        out_dir: output folder.
        config_hash: hash of the resolved config.
        start_step: first step run (0, or the resumed step).
        end_step: steps done after this run.
        records: one dict per step run (losses, lr, teacher temperature, grad norm, seconds).
        backbone: path of the exported backbone (``None`` on ranks other than 0).
    """

    out_dir: Path
    config_hash: str
    start_step: int
    end_step: int
    records: list[dict] = field(default_factory=list)
    backbone: Path | None = None


def build_pretrainer(cfg: dict):
    """Build the ``Sapiens2Pretrainer`` of a resolved config.

    Raises:
        BenchError: any build failure (unknown type or arch, bad arguments), naming the config.
    """
    try:
        return build(cfg["model"])
    except (KeyError, ValueError, TypeError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise BenchError(f"pretraining config {cfg['name']!r}: cannot build the model: {msg}") from e


def _check_sizes(model, crops: MultiCrop, cfg: dict) -> tuple[int, int]:
    backbone = model.student.backbone
    grids = {}
    for key, size in (("global_size", crops.global_size), ("local_size", crops.local_size)):
        if key == "local_size" and crops.n_local == 0:
            continue
        try:
            grids[key] = token_grid(backbone, size)
        except ValueError as e:
            raise BenchError(f"pretraining config {cfg['name']!r}: crops.{key} {list(size)}: {e}") from e
    return grids["global_size"]


def _read_log(path: Path, before: int) -> list[dict]:
    """The log rows of the steps before ``before``; a partial last line (a run killed mid-write) is dropped.

    Raises:
        BenchError: a malformed line elsewhere, naming the file and the line.
    """
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            step = int(row["step"])
        except (ValueError, KeyError, TypeError) as e:
            if i == len(lines):  # no newline after it: the write of the last row was cut off
                print(f"pretrain: {path}: dropping the partial last line {i}", flush=True)
                continue
            raise BenchError(f"{path}: line {i} is not a log row ({type(e).__name__}: {e}); "
                             "fix or delete that line to resume") from e
        if step < before:
            rows.append(row)
    return rows


def _mean_over_ranks(values: dict[str, float]) -> dict[str, float]:
    if not dist_utils.is_distributed():
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    dist_utils.all_reduce_(t)
    return {k: float(v) / dist_utils.get_world_size() for k, v in zip(keys, t.tolist())}


def resolve_data_dir(cfg: dict, data_dir: str | Path | None, progress: bool = True) -> Path:
    """The image folder of a run: ``data_dir``, or the config's ``data`` section rendered (cached).

    Under torchrun rank 0 renders and the other ranks wait for it.

    Raises:
        BenchError: neither is given.
    """
    if data_dir is not None:
        return Path(data_dir)
    if cfg["data"] is None:
        raise BenchError(f"pretraining config {cfg['name']!r} names no data: give a data folder (--data DIR)")

    workers = cfg["run"]["render_workers"]
    if dist_utils.get_rank() == 0:
        folder = ensure_unlabelled(cfg["data"], workers=workers, progress=progress)
    dist_utils.barrier()
    if dist_utils.get_rank() != 0:
        folder = ensure_unlabelled(cfg["data"], workers=workers, progress=False)
    return folder


def pretrain(config: dict, data_dir: str | Path | None, out_dir: str | Path, *, resume: bool = False,
             stop_at: int | None = None, device: str = "cpu", progress: bool = True) -> PretrainResult:
    """Run (or resume) pretraining.

    Args:
        config: a (partial) config dict; see :mod:`sapiens2.pretrain.recipes`.
        data_dir: unlabelled image folder (see :func:`~sapiens2.pretrain.data.list_images`);
            ``None``: the config's ``data`` section, rendered once and cached.
        out_dir: output folder: ``config.json``, ``log.jsonl``, ``train_state.pt``,
            ``backbone.safetensors`` and ``backbone.json``.
        resume: continue from ``out_dir/train_state.pt`` (same config, images and seed, same number
            of processes: the state's run identity must match).
        stop_at: stop after this many steps in total (the schedule still spans ``config["steps"]``);
            a later ``resume`` continues as if never stopped.
        device: ``cpu`` or ``cuda``.
        progress: show a tqdm bar (rank 0).

    Returns:
        A :class:`PretrainResult`.

    Raises:
        BenchError: bad input (see the module docstring), found before the first step.
        OutputBusyError: another run is writing into ``out_dir`` (it holds the folder's lock).
    """
    cfg = resolve_config(config)
    # A second run into this folder fails here, before reading or writing anything in it.
    with output_lock(out_dir, f"pretrain {cfg['name']}"):
        return _pretrain(cfg, data_dir, Path(out_dir), resume, stop_at, device, progress)


def _pretrain(cfg: dict, data_dir, out: Path, resume: bool, stop_at, device: str, progress: bool):
    """:func:`pretrain` holding the lock of its output folder."""
    chash = config_hash(cfg)
    rank, world = dist_utils.get_rank(), dist_utils.get_world_size()
    end = cfg["steps"] if stop_at is None else int(stop_at)
    if not 0 < end <= cfg["steps"]:
        raise BenchError(f"stop_at must be in 1..{cfg['steps']} (the config's steps), got {stop_at}")
    state = None
    if resume:
        state = load_state(out / STATE_FILE, chash, world)
    elif (out / STATE_FILE).exists():
        raise BenchError(f"{out / STATE_FILE} exists: pass --resume to continue it, or choose another --out")

    torch.manual_seed(cfg["seed"])  # same initial weights on every rank
    model = build_pretrainer(cfg)
    try:
        crops = MultiCrop(n_global=cfg["model"]["n_global"], **cfg["crops"])
    except (TypeError, ValueError) as e:
        raise BenchError(f"pretraining config {cfg['name']!r}: crops: {e}") from e
    grid = _check_sizes(model, crops, cfg)
    # After the config checks, so a bad config fails before a recipe's images are rendered.
    files = list_images(resolve_data_dir(cfg, data_dir, progress))
    read_image(files[0])
    # The run identity: which images, which recipe, which seed; a resume must match it.
    run = {"config_hash": chash, "seed": int(cfg["seed"]), "data_sha256": images_sha256(files),
           "num_images": len(files)}
    if state is not None:
        check_run(state, run, out / STATE_FILE)
    opt_cfg = cfg["optim"]
    optimizer = build_optimizer(model.student, opt_cfg["lr"], opt_cfg["betas"], opt_cfg["weight_decay"])
    start = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        del state
    model.to(device)
    result = PretrainResult(out_dir=out, config_hash=chash, start_step=start, end_step=max(start, end))

    if rank == 0:
        write_json_atomic(out / "config.json", {"config_hash": chash, "run": run, "config": cfg})
    log_path = out / LOG_FILE
    if rank == 0:
        kept = _read_log(log_path, start)
        out.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in kept)

    student = model.student
    if dist_utils.is_distributed():
        from torch.nn.parallel import DistributedDataParallel

        on_cuda = str(device).startswith("cuda")
        # init_from_env made cuda:LOCAL_RANK the current device; "cuda" means that one
        ids = [torch.cuda.current_device()] if on_cuda else None
        student = DistributedDataParallel(student, device_ids=ids)
    dataset = StepBatches(files, crops, cfg["batch_size"], cfg["seed"], rank, world,
                          masking=model.masking, mask_grid=grid)
    loader = torch.utils.data.DataLoader(dataset, sampler=range(start, end), batch_size=None,
                                         num_workers=cfg["run"]["num_workers"])
    autocast = (torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
                if cfg["precision"] == "bf16" else contextlib.nullcontext())
    from tqdm import tqdm

    bar = tqdm(total=max(0, end - start), desc=f"pretrain {cfg['name']}", unit="step",
               disable=not (progress and rank == 0))
    model.train()
    step = start
    for step, batch in zip(range(start, end), loader):
        t0 = time.perf_counter()
        lr = lr_at(step, opt_cfg["lr"], opt_cfg["warmup_steps"], cfg["steps"], opt_cfg["min_lr"])
        set_lr(optimizer, lr)
        batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}
        with autocast:
            outputs = student(batch["globals"], batch["locals"], batch["ids_keep"])
            losses = model.losses(outputs, batch, step)
        if not torch.isfinite(losses["loss"]):
            raise BenchError(f"pretraining step {step}: non-finite loss "
                             f"{ {k: float(v) for k, v in losses.items()} }")
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        if step < opt_cfg["freeze_prototypes_steps"] and model.student.head is not None:
            model.student.head.prototypes.grad = None  # AdamW skips it: no update, no decay
        grad_norm = torch.nn.utils.clip_grad_norm_(model.student.parameters(), opt_cfg["clip_grad"])
        if not torch.isfinite(grad_norm):  # before the update: a bad step is neither applied nor saved
            raise BenchError(f"pretraining step {step}: non-finite gradient norm {float(grad_norm)}; the "
                             "step was not applied and nothing of it was saved")
        optimizer.step()
        model.update_teacher()
        t_temp = teacher_temperature(step, *model.teacher_temp, model.teacher_temp_warmup_steps)
        record = {"step": step, "run_key": run_key(run),
                  **_mean_over_ranks({k: float(v.detach()) for k, v in losses.items()}),
                  "lr": lr, "grad_norm": float(grad_norm), "teacher_temp": t_temp,
                  "seconds": time.perf_counter() - t0}
        result.records.append(record)
        if rank == 0:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
        bar.update(1)
        if (step + 1) % cfg["run"]["log_every"] == 0:
            bar.set_postfix({k: f"{record[k]:.4g}" for k in ("loss", "mae", "cl", "koleo") if k in record})
        done = step + 1
        if rank == 0 and (done % cfg["run"]["checkpoint_every"] == 0 or done == end):
            save_state(out / STATE_FILE, model=model, optimizer=optimizer, step=done, config=cfg,
                       config_hash=chash, world_size=world, run=run)
    bar.close()
    if rank == 0:
        which = cfg["export"] if model.teacher is not None else "student"  # no teacher: the student
        result.backbone = export_backbone(
            out, model.export_backbone(which), cfg["model"]["backbone"], which=which,
            step=result.end_step, config=cfg, config_hash=chash, run=run)
    dist_utils.barrier()
    return result
