"""torch.distributed helpers: rank queries, collectives for evaluator states, torchrun set-up.

Every helper is a no-op (or the identity) when torch.distributed is not initialised, so the same
evaluator code runs on one process and under ``torchrun``. Collectives run on the device that the
process group's backend needs (CUDA for NCCL, CPU for gloo); tensors are moved there and back.

Example:
    >>> import torch
    >>> from sapiens2.distributed import all_gather_varlen, is_distributed
    >>> is_distributed()
    False
    >>> [t.tolist() for t in all_gather_varlen(torch.tensor([3, 1]))]
    [[3, 1]]
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch
import torch.distributed as dist

_REDUCE_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}


def is_distributed() -> bool:
    """True when torch.distributed is available, initialised and has more than one rank."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    """This process's rank (0 when not distributed)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def get_world_size() -> int:
    """Number of processes (1 when not distributed)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def comm_device() -> torch.device:
    """The device collectives must use for the default process group's backend."""
    backend = dist.get_backend() if dist.is_initialized() else "gloo"
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_(tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """All-reduce ``tensor`` in place with ``op`` (``sum``, ``max`` or ``min``) and return it.

    Args:
        tensor: the local value; bool tensors are reduced as uint8 (sum acts as logical or).
        op: the reduction.

    Returns:
        ``tensor``, now holding the reduced value on every rank.
    """
    if op not in _REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {sorted(_REDUCE_OPS)}")
    if not is_distributed():
        return tensor
    dev = comm_device()
    work = tensor.to(dev, dtype=torch.uint8 if tensor.dtype == torch.bool else tensor.dtype).contiguous()
    dist.all_reduce(work, op=getattr(dist.ReduceOp, _REDUCE_OPS[op]))
    if tensor.dtype == torch.bool:
        work = work > 0
    tensor.copy_(work.to(tensor.device))
    return tensor


def all_gather_varlen(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Gather tensors whose first dimension differs between ranks.

    Args:
        tensor: local tensor of shape ``(n_rank, *rest)``; ``rest`` and dtype must agree on all ranks.

    Returns:
        One tensor per rank, in rank order, on ``tensor``'s device.
    """
    if not is_distributed():
        return [tensor]
    dev = comm_device()
    local = tensor.to(dev).contiguous()
    n = torch.tensor([local.shape[0]], device=dev, dtype=torch.int64)
    sizes = [torch.zeros_like(n) for _ in range(get_world_size())]
    dist.all_gather(sizes, n)
    sizes_i = [int(s.item()) for s in sizes]
    n_max = max(sizes_i)
    padded = torch.zeros((n_max, *local.shape[1:]), dtype=local.dtype, device=dev)
    padded[: local.shape[0]] = local
    bucket = [torch.empty_like(padded) for _ in sizes_i]
    dist.all_gather(bucket, padded)
    return [b[:s].to(tensor.device) for b, s in zip(bucket, sizes_i)]


def is_main() -> bool:
    """True on rank 0."""
    return get_rank() == 0


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
    if is_distributed():
        dist.barrier()


def all_gather_object(obj) -> list:
    """Every rank's ``obj`` in rank order (``[obj]`` on one process)."""
    if not is_distributed():
        return [obj]
    out = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out
