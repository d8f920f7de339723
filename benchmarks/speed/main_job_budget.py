"""The main job's budget on a fresh run: render time, probe time, peak memory, user CPU, the load.

Runs ``sapiens2-bench run ARGS`` under ``/usr/bin/time -v`` with an empty split cache (a fresh run:
the split is rendered; anny's model cache, which ``scripts/bootstrap.sh`` builds, is kept), samples
the load average and the summed resident memory of the job's whole process tree (the render
workers run beside the main process; ``time -v`` reports only the largest one) every few seconds,
and writes a measurement file (``benchmarks.results.write_measurement``). ``--from DIR`` reads a run
made before by the same means (``log.txt``, ``time.txt``, ``samples.txt``) instead of running one;
a run stopped during the probe gives the backbones it finished (``finished`` false).

Example:
    python -m benchmarks.speed.main_job_budget --work /tmp/budget \\
        --json benchmarks/results/mainjob/main_job_realistic.json
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.results import start_measurement, write_measurement


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (from /proc)."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry.name)] = int(fields[1])
    found, frontier = [root], [root]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _sample(root: int, out: Path, stop: threading.Event, every: float) -> None:
    """Append ``HH:MM:SS load1 tree_rss_kb`` to ``out`` every ``every`` seconds until ``stop``."""
    with open(out, "a") as f:
        while not stop.is_set():
            load = os.getloadavg()[0]
            rss = sum(_rss_kb(p) for p in _tree(root))
            f.write(f"{time.strftime('%H:%M:%S', time.gmtime())} {load:.2f} {rss}\n")
            f.flush()
            stop.wait(every)


def run_job(work: Path, job_args: list[str], every: float = 5.0) -> None:
    """Run the main job fresh into ``work`` (log.txt, time.txt, samples.txt, out/, cache/)."""
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SAPIENS2_BENCH_CACHE": str(work / "cache")}
    cmd = ["/usr/bin/time", "-v", "-o", str(work / "time.txt"), sys.executable, "-m",
           "benchmarks.cli.main", "run", "--out", str(work / "out"), *job_args]
    with open(work / "log.txt", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(proc.pid, work / "samples.txt", stop, every))
        sampler.start()
        code = proc.wait()
        stop.set()
        sampler.join()
    if code != 0:
        raise SystemExit(f"the main job failed (exit {code}); see {work / 'log.txt'}")


def _time_v(text: str) -> dict:
    """The fields of ``/usr/bin/time -v`` this measurement keeps."""
    def field(label: str) -> str:
        m = re.search(rf"{re.escape(label)}: (.+)", text)
        if m is None:
            raise ValueError(f"time -v output: no {label!r}")
        return m.group(1).strip()

    wall = [float(x) for x in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    return {"wall_s": round(sum(v * 60 ** i for i, v in enumerate(reversed(wall))), 1),
            "user_cpu_s": float(field("User time (seconds)")),
            "system_cpu_s": float(field("System time (seconds)")),
            "largest_process_peak_rss_gb": round(int(field("Maximum resident set size (kbytes)")) / 2**20, 2)}


def summarise(work: Path) -> dict:
    """The numbers of a finished run in ``work``."""
    log = (work / "log.txt").read_text()
    ready = re.search(r"\(ready in (\d+)s\)", log)
    total = re.search(r"^total (\d+)s", log, re.M)
    if ready is None:
        raise ValueError(f"{work / 'log.txt'}: no 'ready in' line (the split was not rendered)")
    done = [int(s) for s in re.findall(r"done in (\d+)s", log)]
    probed = re.findall(r"^  \(\d+/\d+\) (\S+)", log, re.M)
    samples = [line.split() for line in (work / "samples.txt").read_text().splitlines() if line.strip()]
    loads = [float(s[1]) for s in samples]
    return {**_time_v((work / "time.txt").read_text()),
            "render_s": int(ready.group(1)), "finished": total is not None,
            "job_s": int(total.group(1)) if total else None,
            "probe_s_per_backbone": dict(zip(probed, done)),
            "process_tree_peak_rss_gb": round(max(int(s[2]) for s in samples) / 2**20, 2),
            "load_1min": {"min": min(loads), "median": sorted(loads)[len(loads) // 2], "max": max(loads)},
            "samples": len(samples)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True,
                    help="folder of the run (log, time, samples, output, split cache)")
    ap.add_argument("--json", required=True, help="the measurement file to write")
    ap.add_argument("--from", dest="done", action="store_true", help="read a run made before in --work")
    ap.add_argument("--notes", default="", help="caveats kept with the numbers")
    ap.add_argument("--command", default=None, help="with --from: the command line that made the run")
    ap.add_argument("job_args", nargs=argparse.REMAINDER, help="after --: the arguments of `run`")
    args = ap.parse_args(argv)
    work = Path(args.work)
    started = start_measurement()
    if not args.done:
        run_job(work, [a for a in args.job_args if a != "--"])
    numbers = summarise(work)
    path = write_measurement(args.json, "a fresh main job on the realistic split (render + probe): wall, "
                             "CPU, peak memory, with the load", numbers, started=started, notes=args.notes,
                             command=args.command)
    print(numbers)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
