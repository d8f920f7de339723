"""2-process (gloo, CPU) evaluation with DistributedSampler padding equals the single-process result."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.ddp

N_SAMPLES = 7  # odd: DistributedSampler pads one duplicate for 2 ranks
BATCH = 2


def make_dataset(task: str, n: int = N_SAMPLES) -> list[tuple]:
    g = torch.Generator().manual_seed(123)
    h, w = 12, 10
    items = []
    for _ in range(n):
        mask = torch.rand(h, w, generator=g) > 0.3
        if task == "seg":
            gt = torch.randint(0, 5, (h, w), generator=g)
            gt[torch.rand(h, w, generator=g) > 0.9] = 255
            items.append((torch.randn(5, h // 2, w // 2, generator=g), gt))
        elif task == "albedo":
            gt = torch.rand(3, h, w, generator=g)
            items.append(
                (
                    (
                        gt
                        + 0.1
                        * torch.randn(3, h // 2, w // 2, generator=g)
                        .repeat_interleave(2, 1)
                        .repeat_interleave(2, 2)
                    ).clamp(0, 1),
                    gt,
                    mask,
                )
            )
        else:
            gt = torch.randn(3, h, w, generator=g) + (
                torch.tensor([0, 0, 3.0]).view(3, 1, 1) if task == "pointmap" else 0
            )
            items.append((gt[:, ::2, ::2] + 0.2 * torch.randn(3, h // 2, w // 2, generator=g), gt, mask))
    return items


def build(task: str):
    from evaluators import build_evaluator

    kw = {"num_classes": 5} if task == "seg" else {}
    return build_evaluator(task, **kw)


def run_over(ev, items, indices: list[int], keyed: bool = True) -> None:
    for start in range(0, len(indices), BATCH):
        idx = indices[start : start + BATCH]
        cols = list(zip(*[items[i] for i in idx]))
        ev.update(*[torch.stack(c) for c in cols], index=idx if keyed else None)


def _worker(rank: int, world: int, port: int, tasks: list[str], out: dict) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.utils.data.distributed import DistributedSampler

        res = {}
        for task in tasks:
            items = make_dataset(task)
            sampler = DistributedSampler(
                list(range(len(items))), num_replicas=world, rank=rank, shuffle=True, seed=3
            )
            indices = list(sampler)
            ev = build(task)
            run_over(ev, items, indices)
            ev.sync()
            r = ev.compute()
            r.pop("conventions")
            res[task] = (indices, r, ev.bootstrap_intervals(list(ev.bootstrap_keys), resamples=200))
        out[rank] = res
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _assert_same(a: dict, b: dict, task: str) -> None:
    assert set(a) == set(b)
    for k in a:
        if k == "per_class":
            for m in a[k]:
                for c in a[k][m]:
                    x, y = a[k][m][c], b[k][m][c]
                    assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9, (task, k, m, c)
            continue
        x, y = a[k], b[k]
        assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9 * max(1.0, abs(y)), (task, k, x, y)


TASKS = ["seg", "normal", "pointmap", "albedo"]


@pytest.mark.slow
def test_two_process_gloo_equals_single_process():
    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_worker, args=(2, _free_port(), TASKS, out), nprocs=2, join=True)
    for task in TASKS:
        idx0, r0, iv0 = out[0][task]
        idx1, r1, iv1 = out[1][task]
        # the sampler really padded: 8 slots for 7 samples, one index seen twice
        assert len(idx0) + len(idx1) == N_SAMPLES + 1
        assert len(set(idx0) | set(idx1)) == N_SAMPLES
        ref = build(task)
        run_over(ref, make_dataset(task), list(range(N_SAMPLES)))
        rr = ref.compute()
        rr.pop("conventions")
        assert r0["num_samples"] == N_SAMPLES
        _assert_same(r0, rr, task)
        _assert_same(r1, rr, task)
        # the per-image rows gathered in canonical order: bootstrap intervals are identical
        assert iv0 == iv1 == ref.bootstrap_intervals(list(ref.bootstrap_keys), resamples=200), task
        # without index keys the padded duplicate is counted twice: the comparison above can fail
        naive = build(task)
        run_over(naive, make_dataset(task), idx0 + idx1, keyed=False)
        assert naive.compute()["num_samples"] == N_SAMPLES + 1
        keyed = build(task)
        run_over(keyed, make_dataset(task), idx0 + idx1)
        kr = keyed.compute()
        kr.pop("conventions")
        _assert_same(kr, rr, task)
