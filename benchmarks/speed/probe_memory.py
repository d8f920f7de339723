"""Peak memory and time of the probe against the number of scenes and the input size.

Each configuration (path x backbone x input size x scenes) runs in its own subprocess, so its peak
RSS is its own (``os.wait4``'s ``ru_maxrss``); wall and CPU time are measured there too. Paths:
``stream`` is ``run_probe`` (the streamed spine: a batch of scenes at a time), ``forward``
is the bare backbone forward over the very images the probe reads (the scenes and the pose crops of
both splits, read beforehand and not timed): the physical limit the probe's cost is measured
against. Each runs the default protocol (the closed-form linear read-out) at the given input size,
all five tasks unless ``--tasks`` (``--protocol body``: the trained-body variant, whose train split
the stream path spills to disk); ``stream`` also reports its seconds per stage (from its records;
``eval`` counts a scene group's shared test pass once per task, ``test_rest`` is the wall time the
other stages leave: that pass and the metrics, once; default protocol only).
The synthetic splits are rendered once per (scenes, size) under ``--data-root``.

A configuration whose RSS passes ``--max-rss-gb`` (default 4, for a shared machine) is stopped and
reported as such; the next larger n of the same path, backbone and size is then skipped.

Usage:
    .venv/bin/python benchmarks/speed/probe_memory.py [--n 64,256,1024] [--sizes 256x192,512x384,1024x768]
        [--backbones pixels,sapiens2_cpu_small,gt-oracle] [--paths stream,forward] [--json OUT.json]
    .venv/bin/python benchmarks/speed/probe_memory.py --n 8 --sizes 64x48   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from benchmarks.probe.api import RunOptions, run_probe
from benchmarks.probe.backbones import build_probe_backbone, resolve_backbone_cfg
from benchmarks.probe.data.loader import SceneLoader
from benchmarks.probe.features.store import backbone_autocast
from benchmarks.probe.protocol import body_protocol, default_protocol
from benchmarks.probe.tasks import build_task
from benchmarks.results import start_measurement, write_measurement
from sapiens2.datasets.synth import ensure_default_split
from sapiens2.records.results import read_record
from sapiens2.records.view import RecordView

ROOT = Path(__file__).resolve().parents[2]

TASKS = "pose,seg,normal,pointmap,albedo"


def _size(text: str) -> tuple[int, int]:
    h, w = (int(v) for v in text.lower().split("x"))
    return h, w


def run_child(cfg: dict) -> dict:
    """One configuration in this process: returns its wall and CPU seconds and what it produced."""
    base = body_protocol() if cfg.get("protocol") == "body" else default_protocol()
    protocol = base.replace(input_size=list(cfg["size"]),
                                          max_train_samples=cfg.get("max_train", 0),
                                          max_test_samples=cfg.get("max_test", 0))
    tasks = cfg["tasks"].split(",")
    work = Path(cfg["work"])
    if cfg["path"] == "forward":
        return bare_forward(cfg["backbone"], tasks, cfg["data"], protocol)
    if cfg["path"] != "stream":
        raise ValueError(f"--paths {cfg['path']!r}: expected stream or forward")

    t0, c0 = time.perf_counter(), time.process_time()
    paths = run_probe(cfg["backbone"], tasks, cfg["data"], work / "out", protocol=protocol,
                      options=RunOptions(workers=int(cfg.get("workers", 0))))
    res = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "records": len(paths)}
    res["stages"] = stage_seconds(paths)
    if cfg.get("protocol") != "body":
        # eval_s sums a scene group's shared test pass once per task; the wall time left after the
        # other stages is that pass (read-outs, evaluators) plus the metrics and bootstrap, counted once
        st = res["stages"]
        before = sum(st.get(k, 0.0) for k in ("data_s", "features_s", "shortcut_fit_s"))
        st["test_rest_s"] = res["wall_s"] - before
    return res


def stage_seconds(paths) -> dict:
    """Seconds per stage of a probe run, from its records (a scene group's shared stages counted once)."""
    groups: dict = {}
    for p in paths:
        t = dict(RecordView.of(read_record(p)).timings)
        # the tasks of one scene group share its data, features and statistics seconds (eval_s is theirs)
        key = tuple(t.get(k) for k in ("data_s", "features_s", "statistics_s"))
        groups.setdefault(key, {**t, "eval_s": 0.0})["eval_s"] += t.get("eval_s", 0.0)
    out: dict = {}
    for t in groups.values():
        for k, v in t.items():
            out[k] = out.get(k, 0.0) + v
    return out


def bare_forward(backbone: str, tasks, data, protocol) -> dict:
    """Seconds of the backbone forward alone over every image the probe reads (each batch is read
    first; only the forward is timed)."""
    import torch

    objs = {t: build_task(t, protocol) for t in tasks}
    bb = build_probe_backbone(resolve_backbone_cfg(backbone), img_size=tuple(protocol.input_size))
    layers = protocol.tapped_layers(bb.num_layers)
    wall = cpu = 0.0
    images = 0
    # streamed: only the forward is timed, one batch in memory at a time
    with torch.inference_mode(), backbone_autocast("cpu", protocol.backbone_dtype):
        for split, limit in ((protocol.train_split, protocol.max_train_samples),
                             (protocol.test_split, protocol.max_test_samples)):
            loader = SceneLoader(data, objs, split, protocol, limit=limit)
            for g in loader.groups:
                for b in loader.batches(g, targets=False):
                    t0, c0 = time.perf_counter(), time.process_time()
                    bb.extract(b.images, layers, protocol.padding)
                    wall += time.perf_counter() - t0
                    cpu += time.process_time() - c0
                    images += len(b.images)
    return {"wall_s": wall, "cpu_s": cpu, "records": 0, "images": images}


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def measure(cfg: dict, max_rss_gb: float, timeout_s: float) -> dict:
    """Run ``cfg`` in a subprocess; its peak RSS (GB), wall and CPU seconds, or why it was stopped."""
    with tempfile.TemporaryDirectory(prefix="probe_memory_") as work:
        cfg = {**cfg, "work": work}
        out = Path(work) / "result.json"
        cmd = [sys.executable, __file__, "--child", json.dumps(cfg), "--child-out", str(out)]
        t0 = time.perf_counter()
        log = open(Path(work) / "stderr.txt", "w+")  # a file, not a pipe: a full pipe would block the child
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, text=True)
        stopped = None
        while True:  # os.wait4, not Popen.poll: the reaping call is the one that gets the rusage
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if _rss_kb(proc.pid) > max_rss_gb * 2**20:
                stopped = f"RSS passed {max_rss_gb} GB"
            elif time.perf_counter() - t0 > timeout_s:
                stopped = f"ran past {timeout_s:.0f} s"
            if stopped:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        err = log.read()
        log.close()
        res = {
            "peak_rss_gb": usage.ru_maxrss / 2**20,
            "wall_s": time.perf_counter() - t0,
            "cpu_s": usage.ru_utime + usage.ru_stime,
        }
        if stopped:
            return {**res, "stopped": stopped}
        if proc.returncode != 0 or not out.is_file():
            why = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
            return {**res, "error": why}
        inner = json.loads(out.read_text())
        return {
            **res,
            "probe_wall_s": inner["wall_s"],
            "probe_cpu_s": inner["cpu_s"],
            "records": inner["records"],
            **({"stages": inner["stages"]} if "stages" in inner else {}),
            **({"images": inner["images"]} if "images" in inner else {}),
        }


def _stages(res: dict) -> str:
    st = res.get("stages")
    if not st:
        return ""
    keys = ("data_s", "features_s", "statistics_s", "shortcut_fit_s", "train_s", "eval_s", "test_rest_s")
    return "  stages: " + ", ".join(f"{k[:-2]} {st[k]:.1f}" for k in keys if k in st)


def ensure_split(root: Path, n: int, size: tuple[int, int]) -> Path:
    return Path(ensure_default_split(f"mem{n}-{size[0]}x{size[1]}", n=n, size=size, seed=0, root=root))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="64,256,1024", help="scenes per split, comma-separated")
    ap.add_argument("--sizes", default="256x192,512x384,1024x768", help="input sizes HxW")
    ap.add_argument("--backbones", default="pixels,sapiens2_cpu_small,gt-oracle")
    ap.add_argument("--paths", default="stream", help="stream and/or forward (comma-separated)")
    ap.add_argument("--workers", type=int, default=0, help="data-loader workers of the stream path")
    ap.add_argument("--max-train", type=int, default=0, help="cap on train samples per task (0: all)")
    ap.add_argument("--max-test", type=int, default=0, help="cap on test samples per task (0: all)")
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--protocol", default="default", choices=("default", "body"),
                    help="the linear read-out (default) or the trained-body variant (body_protocol)")
    ap.add_argument("--data-root", default=None, help="where the synthetic splits are rendered (kept)")
    ap.add_argument("--max-rss-gb", type=float, default=4.0)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration")
    ap.add_argument("--json", default=None, help="also write every result to this file")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = run_child(json.loads(args.child))
        Path(args.child_out).write_text(json.dumps(res))
        return

    started = start_measurement()
    root = Path(args.data_root or Path(tempfile.gettempdir()) / "probe_memory_data")
    ns = sorted(int(v) for v in args.n.split(","))
    print(f"probe memory: n = {ns}, sizes {args.sizes}, tasks {args.tasks}, protocol {args.protocol}, "
          f"RSS cap {args.max_rss_gb} GB")
    print(
        f"{'path':9s} {'backbone':20s} {'size':9s} {'n':>5s} {'peak GB':>8s} {'wall s':>8s} "
        f"{'cpu s':>8s}  note"
    )
    results = []
    for size in (_size(s) for s in args.sizes.split(",")):
        splits = {n: ensure_split(root, n, size) for n in ns}
        for path in args.paths.split(","):
            for backbone in args.backbones.split(","):
                skip = None
                for n in ns:
                    cfg = {
                        "path": path,
                        "backbone": backbone,
                        "size": list(size),
                        "tasks": args.tasks,
                        "data": str(splits[n]),
                        "n": n,
                        "workers": args.workers,
                        "max_train": args.max_train,
                        "max_test": args.max_test,
                        "protocol": args.protocol,
                    }
                    if path == "forward" and backbone in ("gt-oracle", "floor"):
                        continue  # no backbone to run
                    res = {"skipped": skip} if skip else measure(cfg, args.max_rss_gb, args.timeout)
                    note = res.get("stopped") or res.get("error") or res.get("skipped") or ""
                    if res.get("stopped"):
                        skip = f"n = {n} was stopped"
                    rss, wall, cpu = (res.get(k, float("nan")) for k in ("peak_rss_gb", "wall_s", "cpu_s"))
                    print(
                        f"{path:9s} {backbone:20s} {size[0]}x{size[1]:<5d} {n:5d} {rss:8.2f} {wall:8.1f} "
                        f"{cpu:8.1f}  {note}{_stages(res)}",
                        flush=True,
                    )
                    results.append({"config": {k: v for k, v in cfg.items() if k != "data"}, **res})
    if args.json:
        write_measurement(args.json, "probe peak memory, wall and CPU seconds per configuration", results,
                          started=started)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"(this driver: peak RSS {usage.ru_maxrss / 2**20:.2f} GB, rendering included)")


if __name__ == "__main__":
    main()
