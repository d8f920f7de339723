"""CPU cost of the masked read-out's shrink: the probe with the shrink against the same probe without it.

A masked task's read-out (normal, pointmap, albedo) is shrunk toward the feature-free floor by one
factor per channel (``masked_readout="mask-and-prior-shrunk"``, :mod:`benchmarks.probe.readout.shrink`):
fold 0 is refitted alone (:func:`~benchmarks.probe.readout.shrink.heldout_shrink`) and the held-out
quarter of the train images goes through the feature stream once more
(:func:`~benchmarks.probe.readout.shrink.stream_heldout`). This script probes the masked tasks with
the default protocol and with the same protocol unshrunk (``"mask-and-prior"``), per backbone, in
alternating order (A B, then B A, ...), each run in a fresh output folder, and reports the CPU seconds
of each run (this process, all threads) and the CPU seconds spent inside those two functions (counted
by wrapping them where the train pass calls them). The samples are read from a sample cache filled
by one untimed run of each variant first, so every timed run reads its scenes alike.

Usage:
    python -m benchmarks.speed.shrink_cost --data DIR --backbones pixels,dinov2_small \\
        --max-train 96 --max-test 32 --rounds 2 --json benchmarks/results/probe/shrink_cost.json
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.probe import api
from benchmarks.probe.readout import stream as stream_module
from benchmarks.probe.readout.shrink import MASK_AND_PRIOR
from benchmarks.probe.records.headline import PROBE_HEADLINE
from benchmarks.results import start_measurement, write_measurement
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView

MASKED_TASKS = ("normal", "pointmap", "albedo")


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its threads so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Counter:
    """CPU and wall seconds and calls of the wrapped functions since the last :meth:`reset`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.cpu_s: dict[str, float] = {}
        self.wall_s: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, fn: Callable) -> Callable:
        name = fn.__name__

        @functools.wraps(fn)
        def counted(*args: object, **kwargs: object) -> object:
            c0, t0 = _cpu_s(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu_s[name] = self.cpu_s.get(name, 0.0) + _cpu_s() - c0
                self.wall_s[name] = self.wall_s.get(name, 0.0) + time.perf_counter() - t0
                self.calls[name] = self.calls.get(name, 0) + 1

        return counted


def _headlines(paths: list[Path]) -> dict[str, float]:

    out = {}
    for p in paths:
        rec = RecordView.of(read_record(p))
        out[rec.task] = rec.metric(PROBE_HEADLINE[rec.task].key)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a split folder (e.g. the procedural embedded split)")
    ap.add_argument("--backbones", default="pixels,dinov2_small")
    ap.add_argument("--tasks", default=",".join(MASKED_TASKS), help="masked tasks to probe")
    ap.add_argument("--max-train", type=int, default=96, help="train scenes (protocol max_train_samples)")
    ap.add_argument("--max-test", type=int, default=32, help="test scenes (protocol max_test_samples)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="pairs of timed runs per backbone (order alternates)")
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the measurement here")
    args = ap.parse_args(argv)

    import torch


    tasks = [t for t in args.tasks.split(",") if t]
    shrunk = api.NAMED_PROTOCOLS["default"]().replace(max_train_samples=args.max_train,
                                                      max_test_samples=args.max_test)
    plain = shrunk.replace(tasks={t: {"masked_readout": MASK_AND_PRIOR} for t in tasks})
    variants = {"shrunk": shrunk, "unshrunk": plain}
    counter = _Counter()
    # the train pass calls them through the stream module's names
    stream_module.heldout_shrink = counter.wrap(stream_module.heldout_shrink)
    stream_module.stream_heldout = counter.wrap(stream_module.stream_heldout)

    work = Path(args.out or tempfile.mkdtemp(prefix="shrink_cost_"))
    options = api.RunOptions(sample_cache=str(work / "samples"))
    started = start_measurement()
    runs = []
    for name in [b for b in args.backbones.split(",") if b]:
        for variant, protocol in variants.items():  # the sample cache is keyed by the protocol ids
            api.run_probe(name, tasks, args.data, work / "warm" / f"{name}-{variant}", protocol=protocol,
                          options=options)
        for r in range(args.rounds):
            order = ("shrunk", "unshrunk") if r % 2 == 0 else ("unshrunk", "shrunk")
            for variant in order:
                counter.reset()
                c0, t0 = _cpu_s(), time.perf_counter()
                paths = api.run_probe(name, tasks, args.data, work / f"{name}-{variant}-{r}",
                                      protocol=variants[variant], options=options)
                run = {"backbone": name, "variant": variant, "round": r,
                       "cpu_s": round(_cpu_s() - c0, 2), "wall_s": round(time.perf_counter() - t0, 2),
                       "shrink_cpu_s": {k: round(v, 2) for k, v in counter.cpu_s.items()},
                       "shrink_wall_s": {k: round(v, 2) for k, v in counter.wall_s.items()},
                       "shrink_calls": dict(counter.calls),
                       "headline": _headlines([p for p in paths if p.name.startswith("seed")])}
                runs.append(run)
                print(json.dumps(run), flush=True)
    summary = {}
    for name in dict.fromkeys(r["backbone"] for r in runs):
        mine = {v: [r for r in runs if r["backbone"] == name and r["variant"] == v] for v in variants}
        cpu = {v: sum(r["cpu_s"] for r in rs) / len(rs) for v, rs in mine.items()}
        inside = sum(sum(r["shrink_cpu_s"].values()) for r in mine["shrunk"]) / len(mine["shrunk"])
        summary[name] = {"cpu_s_shrunk": round(cpu["shrunk"], 2), "cpu_s_unshrunk": round(cpu["unshrunk"], 2),
                         "extra_cpu_s": round(cpu["shrunk"] - cpu["unshrunk"], 2),
                         "extra_share": round((cpu["shrunk"] - cpu["unshrunk"]) / cpu["unshrunk"], 4),
                         "inside_shrink_cpu_s": round(inside, 2),
                         "inside_share_of_shrunk_run": round(inside / cpu["shrunk"], 4)}
    result = {"data": str(args.data), "tasks": tasks, "max_train_samples": args.max_train,
              "max_test_samples": args.max_test, "rounds": args.rounds, "threads": torch.get_num_threads(),
              "protocol_ids": {v: {t: p.protocol_id(t) for t in tasks} for v, p in variants.items()},
              "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    if args.json:
        write_measurement(args.json,
                          "CPU cost of the masked read-out's shrink toward the floor (held-out refit "
                          "and the extra pass over the held-out train images): the probe with and without it",
                          result, started=started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
