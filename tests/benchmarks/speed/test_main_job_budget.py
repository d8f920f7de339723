"""benchmarks.speed.main_job_budget reads a finished run's log, time -v output and samples."""

from __future__ import annotations

import json

import pytest

from benchmarks.speed import main_job_budget as mb

TIME_V = """\tCommand being timed: "python -m benchmarks.cli.main run"
\tUser time (seconds): 1234.50
\tSystem time (seconds): 56.25
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
\tMaximum resident set size (kbytes): 2097152
"""


def _run(work, log: str):
    work.mkdir()
    (work / "log.txt").write_text(log)
    (work / "time.txt").write_text(TIME_V)
    (work / "samples.txt").write_text("14:00:00 3.50 1048576\n14:00:05 9.00 3145728\n14:00:10 1.00 524288\n")
    return work


def test_a_finished_run_gives_its_budget(tmp_path):
    log = ("[1/3] data: embedded synthetic split (realistic; rendered once, cached)\n"
           "      /c/probe-x (ready in 321s)\n  (1/2) gt-oracle [the ceiling]\n      done in 60s\n"
           "  (2/2) floor [the floor]\n      done in 75s\ntotal 900s\n")
    work = _run(tmp_path / "w", log)
    out = tmp_path / "m.json"
    assert mb.main(["--work", str(work), "--json", str(out), "--from", "--command", "run"]) == 0
    rec = json.loads(out.read_text())
    assert rec["command"] == "run" and rec["numbers"] == {
        "wall_s": 3723.5, "user_cpu_s": 1234.5, "system_cpu_s": 56.25, "largest_process_peak_rss_gb": 2.0,
        "render_s": 321, "finished": True, "job_s": 900,
        "probe_s_per_backbone": {"gt-oracle": 60, "floor": 75}, "process_tree_peak_rss_gb": 3.0,
        "load_1min": {"min": 1.0, "median": 3.5, "max": 9.0}, "samples": 3}


def test_a_run_stopped_in_the_probe_gives_what_it_finished_and_none_rendered_is_an_error(tmp_path):
    stopped = _run(tmp_path / "s", "      /c/probe-x (ready in 30s)\n  (1/7) gt-oracle [x]\n"
                   "      done in 9s\n  (2/7) floor [x]\n")
    numbers = mb.summarise(stopped)
    assert numbers["finished"] is False and numbers["job_s"] is None
    assert numbers["probe_s_per_backbone"] == {"gt-oracle": 9}
    work = _run(tmp_path / "w", "[1/3] data: ...\n")
    with pytest.raises(ValueError, match=r"log\.txt: no 'ready in'"):
        mb.summarise(work)
