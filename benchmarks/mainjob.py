"""The main job as a library function: probe the default backbones on the embedded synthetic data, write
the records, compare twins paired, build the leaderboard.

``sapiens2-bench run`` only parses its flags and calls :func:`run_main_job`; scripts (speed, analysis,
reproduction) use the same defaults from here (:data:`DEFAULT_BACKBONES`, :func:`default_data_dir`,
:func:`parse_weights`), never from the CLI. Progress goes to stdout, as the command prints it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.embedded_split import default_data_dir
from benchmarks.job_defaults import DEFAULT_BACKBONES, QUICK_BACKBONES
from benchmarks.probe.api import RunOptions, run_probe
from benchmarks.probe.backbones import (
    FLOOR,
    ORACLE,
    REFERENCE_BACKBONES,
    import_paths,
    resolve_backbone_cfg,
    weight_free,
)
from benchmarks.probe.backbones.presets import twin_pairs
from benchmarks.probe.protocol import body_protocol, default_protocol, quick_protocol
from benchmarks.probe.records.compare import comparisons_from_records, format_comparisons
from benchmarks.probe.records.summary import summary_table
from benchmarks.systems import mediapipe_system as M
from benchmarks.systems.mediapipe_records import run_mediapipe
from leaderboard.build import build_site
from sapiens2.datasets import data_tasks
from sapiens2.errors import BenchError
from sapiens2.output_lock import output_lock
from sapiens2.records.results import load_records
from sapiens2.records.view import record_views
from sapiens2.tasks import task_names
from sapiens2.utils_io import write_json_atomic
from sapiens2.weights import SHIPPED, weights_path

TASKS = ",".join(task_names())

def tasks_of_data(data, protocol) -> tuple[str, str | None]:
    """(the tasks whose ground truth ``data`` has, comma-separated; a note naming the skipped ones, or
    None when none was skipped). A folder of neither split layout gives every task (the readers then
    name what is missing).

    Raises:
        ValueError: the folder has ground truth of no task.
    """
    tasks = data_tasks(data, (protocol.train_split, protocol.test_split))
    if tasks is None:
        return ",".join(task_names()), None
    if not tasks:
        raise ValueError(f"--data {data}: no ground truth of any task ({', '.join(task_names())}); "
                         "see sapiens2/datasets/README.md for the split layout")
    skipped = [t for t in task_names() if t not in tasks]
    note = (f"tasks {','.join(tasks)} (the data's; skipped, no ground truth in {data}: {','.join(skipped)}; "
            "--tasks chooses)")
    return ",".join(tasks), note if skipped else None


def parse_weights(items: Iterable[str]) -> dict[str, str]:
    """``NAME=PATH`` items as ``{backbone name: weights path}``.

    Raises:
        ValueError: an item that is not ``NAME=PATH``.
        FileNotFoundError: a path that does not exist.
    """
    weights = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--weights {item!r}: expected NAME=PATH")
        if not Path(path).exists():
            raise FileNotFoundError(f"--weights {name}: {path} does not exist")
        weights[name.strip()] = path
    return weights


def known_protocol_names() -> dict[str, str]:
    """Names of the probing protocols this version defines, shown in reports beside their short hash.

    Each task has its own protocol id, so every protocol names one id per task.

    Example:
        >>> sorted(set(known_protocol_names().values()))
        ['probe v5 (default: closed-form linear probe)', 'probe v5 quick', 'probe v5 trained body']
    """
    default, quick, body = default_protocol(), quick_protocol(), body_protocol()
    names: dict[str, str] = {}
    for protocol, name in ((default, "(default: closed-form linear probe)"), (quick, "quick"),
                           (body, "trained body")):
        for pid in protocol.protocol_ids().values():
            names.setdefault(pid, f"probe v{protocol.version} {name}")
    return names


@dataclass
class MainJobResult:
    """What the main job made.

    Attributes:
        records_dir: the folder of the result records (``OUT/results``).
        site: the report's files (``{"html", "markdown", "csv"}``).
        comparisons: the paired comparisons made (plain dicts, :mod:`benchmarks.probe.records.compare`).
        not_compared: the pairs that could not be compared (``{"a", "b", "reason"}``).
        comparisons_file: ``OUT/comparisons.json`` when any pair was asked for, else None.
        failed: backbone -> error text, for the backbones that failed (``keep_going``).
    """

    records_dir: Path
    site: dict[str, Path]
    comparisons: list[dict] = field(default_factory=list)
    not_compared: list[dict] = field(default_factory=list)
    comparisons_file: Path | None = None
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0, or 1 when any backbone failed."""
        return 1 if self.failed else 0


def run_main_job(
    out: str | os.PathLike = "sapiens2-bench-out",
    *,
    quick: bool = False,
    backbones: Iterable[str] | None = None,
    tasks: str = TASKS,
    seeds: Iterable[int] = (0,),
    data: str | os.PathLike | None = None,
    generator: str | None = None,
    weights: Mapping[str, str] | None = None,
    include: Iterable[str] = (),
    compare: Iterable[tuple[str, str]] = (),
    include_paper: bool = True,
    mediapipe: bool = True,
    device: str = "cpu",
    keep_going: bool = False,
) -> MainJobResult:
    """Probe ``backbones`` on ``tasks`` under the default (or quick) protocol, compare, build the report.

    Writes one record per (backbone, task, seed) under ``OUT/results``, the leaderboard under
    ``OUT/site`` and, when any pair is compared (``compare`` and every backbone beside its random twin,
    :func:`benchmarks.probe.backbones.presets.twin_pairs`), ``OUT/comparisons.json``.

    Args:
        out: output folder.
        quick: the tiny protocol and backbones (for tests; its own protocol id).
        backbones: backbone names (default :data:`DEFAULT_BACKBONES`, quick :data:`QUICK_BACKBONES`).
        tasks: comma-separated tasks.
        seeds: decoder seeds.
        data: dataset folder (default: the embedded synthetic split, :func:`default_data_dir`).
        generator: the embedded split's generator (``realistic``, or ``procedural``; None: realistic,
            procedural under ``quick``); not with ``data``.
        weights: backbone name -> weights path (:func:`parse_weights`).
        include: ``.py`` files or folders imported before the backbones are resolved.
        compare: extra ``(a, b)`` pairs of backbones of the run to compare paired.
        include_paper: show the paper's numbers in the report.
        mediapipe: evaluate the MediaPipe reference system when it is installed.
        device: torch device.
        keep_going: continue with the next backbone when one fails (its error is kept in ``failed``).

    Returns:
        The :class:`MainJobResult` (``exit_code`` 1 when a backbone failed).

    Raises:
        ValueError: an unknown backbone, weights for a backbone not in the run, a pair not of the run.
        BenchError, RuntimeError, OSError, ...: a backbone failed and ``keep_going`` is off.

    Example:
        The quick job on two backbones and one task (about a minute on two CPU cores)::

            >>> from benchmarks.mainjob import run_main_job
            >>> job = run_main_job("out", quick=True, backbones=["gt-oracle", "pixels"], tasks="seg",
            ...                    compare=[("gt-oracle", "pixels")], mediapipe=False)  # doctest: +SKIP
            >>> job.exit_code, job.records_dir, sorted(job.site)  # doctest: +SKIP
            (0, PosixPath('out/results'), ['csv', 'html', 'markdown'])
            >>> job.comparisons[0]["verdict"]  # doctest: +SKIP
            'gt-oracle better beyond the 95% interval'
    """
    import torch

    t0 = time.perf_counter()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    protocol = quick_protocol() if quick else default_protocol()
    default = QUICK_BACKBONES if quick else DEFAULT_BACKBONES
    names = list(default if backbones is None else backbones)
    if not names:
        raise ValueError("backbones: none given (None runs the default backbones)")
    import_paths(list(include))
    for name in names:  # an unknown name or a bad module:Class fails before any work
        if name not in REFERENCE_BACKBONES:
            resolve_backbone_cfg(name)
    extra = [tuple(p) for p in compare]
    bad = [p for p in extra if len(p) != 2 or p[0] == p[1] or not set(p) <= set(names)]
    if bad:
        raise ValueError(f"compare: {bad} are not pairs of two different backbones of the run ({names})")
    # every backbone against the feature-free floor: a row below it beyond the paired interval is flagged
    # by the verdict ("floor better beyond the interval")
    floor_pairs = [(n, FLOOR) for n in names if FLOOR in names and n not in REFERENCE_BACKBONES]
    pairs = list(dict.fromkeys(extra + twin_pairs(names) + floor_pairs))
    weights = dict(weights or {})
    unused = sorted(set(weights) - set(names))
    if unused:
        raise ValueError(f"--weights given for backbones not in the run: {unused} (backbones: {names})")
    seeds = [int(s) for s in seeds]
    out = Path(out)
    results = out / "results"

    if data is None:
        generator = generator or ("procedural" if quick else "realistic")
        print(f"[1/3] data: embedded synthetic split ({generator}; rendered once, cached)", flush=True)
        td = time.perf_counter()
        data = default_data_dir(protocol, quick=quick, generator=generator)
        print(f"      {data} (ready in {time.perf_counter() - td:.0f}s)")
    else:
        if generator is not None:
            raise ValueError(f"--generator {generator} chooses the embedded split; not with --data {data}")
        print(f"[1/3] data: using {data}")
        print(f"      {data}")
    print(f"[2/3] probing {len(names)} backbone(s) x tasks {tasks} x seeds {seeds} under protocol "
          f"ids {', '.join(f'{t} {i}' for t, i in protocol.protocol_ids().items())}")
    failed: dict[str, str] = {}
    # the backbones read the same split: its decoded samples are kept on disk for the job (each scene
    # is decoded once instead of once per backbone) and removed when the job ends
    with _job_sample_cache(out) as samples:
        for i, name in enumerate(names, 1):
            tb = time.perf_counter()
            if name in weights:
                state = f"weights {weights[name]}"
            elif name == ORACLE:
                state = "features = ground truth: the ceiling of decoder + evaluation"
            elif name == FLOOR:
                state = "no features: the read-out's per-pixel train prior, the level to beat"
            elif weight_free(name):
                state = "a backbone without weights"
            elif name in SHIPPED:
                state = f"shipped pretrained weights {weights_path(name)}"
            else:
                state = "no weights given: seeded random init"
            print(f"  ({i}/{len(names)}) {name} [{state}]", flush=True)
            try:
                run_probe(name, tasks, data, results, seeds=seeds, protocol=protocol,
                          checkpoint=weights.get(name),
                          options=RunOptions(device=device, sample_cache=samples))
            except (BenchError, ValueError, KeyError, RuntimeError, OSError, ImportError, TypeError) as e:
                if not keep_going:
                    raise
                failed[name] = f"{type(e).__name__}: {e}"
                print(f"      FAILED: {failed[name]}")
                continue
            print(f"      done in {time.perf_counter() - tb:.0f}s")
    if mediapipe:
        _mediapipe(data, results / "mediapipe", quick)
    print("[3/3] building the leaderboard")
    comps, skipped = _comparisons(results, pairs, failed, tasks, protocol.protocol_ids())
    paths = build_site([results], out / "site", include_paper=include_paper,
                       title="sapiens2-bench leaderboard (synthetic data, probing)",
                       protocol_names=known_protocol_names(), comparisons=comps)
    print_probe_summary(results)
    job = MainJobResult(results, paths, comps, skipped, failed=failed)
    if pairs:
        print("\n" + format_comparisons(comps))
        for s in skipped:
            print(f"  not compared: {s['a']} vs {s['b']}: {s['reason']}")
        method = "paired percentile bootstrap of a - b over the same resampled test images"
        job.comparisons_file = write_json_atomic(out / "comparisons.json",
                                                 {"method": method, "comparisons": comps, "skipped": skipped})
        print(f"comparisons: {out / 'comparisons.json'}")
    print(f"\nrecords:  {results}")
    print(f"markdown: {paths['markdown']}")
    print(f"report:   {paths['html']}   (open it in a browser; self-contained, works offline)")
    print(f"total {time.perf_counter() - t0:.0f}s")
    if failed:
        print("backbones that failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
    return job


@contextmanager
def _job_sample_cache(out: Path):
    """The job's sample cache folder ``out/.samples``, emptied before and after; the job holds ``out``'s
    lock meanwhile (a second main job into the same folder is refused)."""
    folder = out / ".samples"
    with output_lock(out, "sapiens2-bench run"):
        shutil.rmtree(folder, ignore_errors=True)  # a killed job's leftovers
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _mediapipe(data, out, quick: bool) -> None:
    """Evaluate the MediaPipe reference system (``sapiens2-bench system mediapipe``) when installed."""
    try:
        M.require_mediapipe()
    except RuntimeError as e:
        print(f"  mediapipe reference: skipped ({e})")
        return
    print("  mediapipe reference system (pretrained, shared keypoints / person mask)", flush=True)
    for p in run_mediapipe(out, data=data, n=8 if quick else None, input_size_hw=(256, 192)):
        print(f"wrote {p}")


def print_probe_summary(results) -> None:
    """The probe records under ``results``: headline metric per task with its 95% interval and n."""
    records = record_views(load_records([results], skip_foreign=True))
    if any(r.protocol.kind == "probe" for r in records):
        print("\n" + summary_table(records, list(task_names())))


def _comparisons(results, pairs, failed: dict, tasks: str, protocol_id: dict) -> tuple[list, list]:
    """Paired comparisons of ``pairs`` under ``protocol_id`` (``{task: id}``), and the pairs that could
    not be paired (``{"a", "b", "reason"}``: a backbone failed, or the records refuse to pair)."""
    if not pairs:
        return [], []

    records = load_records([results], skip_foreign=True)
    comps, skipped = [], []
    for a, b in pairs:
        if a in failed or b in failed:
            skipped.append({"a": a, "b": b, "reason": f"{a if a in failed else b} failed"})
            continue
        try:
            comps += comparisons_from_records(records, a, b, tasks, protocol_id, where=str(results))
        except ValueError as e:
            skipped.append({"a": a, "b": b, "reason": str(e)})
    return comps, skipped
