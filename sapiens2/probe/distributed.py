"""torch.distributed plumbing of the probe: ``torchrun`` detection, process group set-up, helpers.

Under ``torchrun --nproc_per_node=N`` the same command runs in N processes: the backbone pass is
sharded over ranks (features all-gathered), decoders train with DDP (each rank takes an equal slice
of the global batch), evaluation is sharded and the evaluator states are reduced. Rank 0 writes files.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch
import torch.distributed as dist

# Rank queries are shared with the evaluators; the probe only adds set-up, gathers and checks.
from evaluators.distributed import get_rank as rank
from evaluators.distributed import get_world_size as world_size
from evaluators.distributed import is_distributed as is_initialized


def is_main() -> bool:
    """True on rank 0."""
    return rank() == 0


def launched_by_torchrun() -> bool:
    """True when the torchrun environment variables are set."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def init_from_env(device: str = "cpu") -> bool:
    """Initialise the default process group from torchrun's environment (gloo on CPU, NCCL on CUDA).

    Returns:
        True when this call created the process group (the caller should tear it down).
    """
    if not launched_by_torchrun() or (dist.is_available() and dist.is_initialized()):
        return False
    backend = "nccl" if str(device).startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend=backend)
    return True


@contextmanager
def process_group(device: str = "cpu"):
    """Context manager: set up the process group under torchrun and destroy it on exit."""
    created = init_from_env(device)
    try:
        yield
    finally:
        if created:
            dist.destroy_process_group()


def barrier() -> None:
    """Synchronise ranks (no-op on one process)."""
    if is_initialized():
        dist.barrier()


def all_gather_object(obj) -> list:
    """Every rank's ``obj`` in rank order (``[obj]`` on one process)."""
    if not is_initialized():
        return [obj]
    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def all_ok(ok: bool, message: str = "") -> None:
    """Raise on every rank when any rank failed a check (keeps ranks from hanging in collectives)."""
    flags = all_gather_object((ok, message))
    bad = [m for f, m in flags if not f]
    if bad:
        raise RuntimeError(bad[0])
