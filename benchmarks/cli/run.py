"""``sapiens2-bench run``: the main job, end to end on the embedded synthetic data.

With no arguments: render (or reuse) the default synthetic split (384 scenes), probe the default
backbones (the shipped pretrained sapiens2_cpu_small and its MAE-only variant beside their
random-init twin, dinov2_small, pixels and the ground-truth oracle) on all five tasks under the
default probing protocol (v5: the linear read-out, floor nested), write one result record per (backbone,
task, seed) with 95% bootstrap intervals, build the leaderboard (Markdown + self-contained HTML,
with the paper's numbers marked reported), print the headline table (value [low, high] n=N per task)
and where the report is. Every backbone X whose random-init twin ``X-random`` (or, for a shipped
backbone, the twin of another shipped backbone of its arch) is in the run, and every
``--compare A:B`` pair, is compared paired (95% paired bootstrap of the difference on the same test
images): printed and written to ``OUT/comparisons.json``.
``--quick`` runs a tiny protocol for tests (its own protocol id, never ranked with the default one).

Backbones that take weights but get none are probed from a seeded random initialisation (the
records and the report say so); pass ``--weights NAME=PATH`` to probe pretrained weights (``probe``
takes ``--weights PATH``). Weight-free backbones (``pixels``) are labelled as such. ``gt-oracle``
(features computed from the ground truth) gives the ceiling of the decoders and the evaluation;
``floor`` (no features: the read-out's per-pixel train prior) the level a backbone must beat.
"""

from __future__ import annotations

import argparse
import time

from sapiens2.tasks import task_names

# The shipped pretrained backbones (the reference objective and its MAE-only ablation, one arch)
# beside their random-init twin, a transformers baseline (random init: no weights can be downloaded
# here), the pixels and the ground-truth ceiling.
DEFAULT_BACKBONES = ("gt-oracle", "floor", "sapiens2_cpu_small", "sapiens2_cpu_small_mae",
                     "sapiens2_cpu_small-random", "dinov2_small", "pixels")
QUICK_BACKBONES = ("gt-oracle", "floor", "sapiens2_tiny", "pixels")
TASKS = ",".join(task_names())


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="main job: probe default backbones on synthetic data, build the report",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("--quick", action="store_true", help="tiny protocol and backbones (for tests)")
    p.add_argument("--out", default="sapiens2-bench-out", help="output folder (results/ and site/)")
    p.add_argument("--backbones", default=None,
                   help=f"comma-separated backbones (default {','.join(DEFAULT_BACKBONES)}; "
                        f"--quick: {','.join(QUICK_BACKBONES)})")
    p.add_argument("--tasks", default=TASKS, help="comma-separated tasks")
    p.add_argument("--seeds", default="0", help="comma-separated decoder seeds")
    p.add_argument("--data", default=None, help="dataset folder (default: the embedded synthetic split)")
    p.add_argument("--weights", action="append", default=[], metavar="NAME=PATH",
                   help="weights for a backbone (repeatable), e.g. "
                        "sapiens2_0.1b=pretrain/sapiens2_0.1b.safetensors")
    p.add_argument("--include", action="append", default=[], metavar="PATH",
                   help="import this .py file or folder before resolving --backbones (repeatable)")
    p.add_argument("--compare", action="append", default=[], metavar="A:B",
                   help="also compare backbones A and B of the run paired (repeatable; X and X-random "
                        "are always compared)")
    p.add_argument("--no-paper", action="store_true", help="leave the paper's numbers out of the report")
    p.add_argument("--no-mediapipe", action="store_true",
                   help="skip the MediaPipe reference system (run only when mediapipe 0.10.21 is installed)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--keep-going", action="store_true", help="continue with the next backbone when one fails")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def _parse_weights(items: list[str]) -> dict[str, str]:
    from pathlib import Path

    weights = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--weights {item!r}: expected NAME=PATH")
        if not Path(path).exists():
            raise FileNotFoundError(f"--weights {name}: {path} does not exist")
        weights[name.strip()] = path
    return weights


def parse_compare(items: list[str], names: list[str]) -> list[tuple[str, str]]:
    """The ``--compare A:B`` pairs, each a pair of backbones of the run.

    A name may itself hold a colon (``package.module:Class``): ``A:B`` is split at the one colon
    that leaves two backbones of the run.

    Raises:
        ValueError: an item that is not two different backbones of the run.

    Example:
        >>> parse_compare(["pixels:m.x:Cls"], ["m.x:Cls", "pixels"])
        [('pixels', 'm.x:Cls')]
    """
    pairs = []
    for item in items:
        splits = [(item[:i], item[i + 1:]) for i, ch in enumerate(item) if ch == ":"]
        ok = [(a, b) for a, b in splits if a in names and b in names and a != b]
        if len(ok) != 1:
            raise ValueError(f"--compare {item!r}: expected A:B with two different backbones of the run "
                             f"(backbones: {', '.join(names)})")
        pairs.append(ok[0])
    return pairs


def run(args: argparse.Namespace) -> int:
    """Run the main job; returns the exit code (non-zero if any backbone failed)."""
    from pathlib import Path

    import torch

    from benchmarks.probe.api import run_probe
    from benchmarks.probe.backbones import (
        FLOOR,
        ORACLE,
        REFERENCE_BACKBONES,
        import_paths,
        resolve_backbone_cfg,
        weight_free,
    )
    from benchmarks.probe.backbones.presets import twin_pairs
    from benchmarks.probe.protocol import default_protocol, quick_protocol
    from leaderboard.build import build_site
    from sapiens2.errors import BenchError
    from sapiens2.weights import SHIPPED, weights_path

    t0 = time.perf_counter()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    protocol = quick_protocol() if args.quick else default_protocol()
    default = ",".join(QUICK_BACKBONES if args.quick else DEFAULT_BACKBONES)
    names = [b.strip() for b in (args.backbones or default).split(",") if b.strip()]
    import_paths(args.include)
    for name in names:  # an unknown name or a bad module:Class fails before any work
        if name not in REFERENCE_BACKBONES:
            resolve_backbone_cfg(name)
    # every backbone against the feature-free floor: a row below it beyond the paired interval is flagged
    # by the verdict ("floor better beyond the interval")
    floor_pairs = [(n, FLOOR) for n in names if FLOOR in names and n not in REFERENCE_BACKBONES]
    pairs = list(dict.fromkeys(parse_compare(args.compare, names) + twin_pairs(names) + floor_pairs))
    weights = _parse_weights(args.weights)
    unused = sorted(set(weights) - set(names))
    if unused:
        raise ValueError(f"--weights given for backbones not in the run: {unused} (backbones: {names})")
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
    out = Path(args.out)
    results = out / "results"

    source = f"using {args.data}" if args.data else "embedded synthetic split (rendered once, cached)"
    print(f"[1/3] data: {source}")
    if args.data:
        data = args.data
    else:
        from benchmarks.cli.probe import default_data_dir

        data = default_data_dir(protocol, quick=args.quick)
    print(f"      {data}")
    print(f"[2/3] probing {len(names)} backbone(s) x tasks {args.tasks} x seeds {seeds} under protocol "
          f"{protocol.protocol_id()}")
    failed: dict[str, str] = {}
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
            run_probe(name, args.tasks, data, results, seeds=seeds, protocol=protocol,
                      checkpoint=weights.get(name), device=args.device)
        except (BenchError, ValueError, KeyError, RuntimeError, OSError, ImportError, TypeError) as e:
            if not args.keep_going or args.debug:
                raise
            failed[name] = f"{type(e).__name__}: {e}"
            print(f"      FAILED: {failed[name]}")
            continue
        print(f"      done in {time.perf_counter() - tb:.0f}s")
    if not args.no_mediapipe:
        _mediapipe(data, results / "mediapipe", args.quick)
    print("[3/3] building the leaderboard")
    from benchmarks.cli.leaderboard import known_protocol_names

    comps, skipped = _comparisons(results, pairs, failed, args.tasks, protocol.protocol_id())
    paths = build_site([results], out / "site", include_paper=not args.no_paper,
                       title="sapiens2-bench leaderboard (synthetic data, probing)",
                       protocol_names=known_protocol_names(), comparisons=comps)
    _print_summary(results)
    if pairs:
        from benchmarks.probe.compare import format_comparisons
        from sapiens2.utils_io import write_json_atomic

        print("\n" + format_comparisons(comps))
        for s in skipped:
            print(f"  not compared: {s['a']} vs {s['b']}: {s['reason']}")
        method = "paired percentile bootstrap of a - b over the same resampled test images"
        write_json_atomic(out / "comparisons.json",
                          {"method": method, "comparisons": comps, "skipped": skipped})
        print(f"comparisons: {out / 'comparisons.json'}")
    print(f"\nrecords:  {results}")
    print(f"markdown: {paths['markdown']}")
    print(f"report:   {paths['html']}   (open it in a browser; self-contained, works offline)")
    print(f"total {time.perf_counter() - t0:.0f}s")
    if failed:
        print("backbones that failed: " + "; ".join(f"{k}: {v}" for k, v in failed.items()))
        return 1
    return 0


def _mediapipe(data, out, quick: bool) -> None:
    """Evaluate the MediaPipe reference system (``sapiens2-bench system mediapipe``) when installed."""
    try:
        from benchmarks.systems import mediapipe_system as M
    except ImportError as e:  # pragma: no cover - the module is part of the package
        print(f"  mediapipe reference: skipped ({e})")
        return
    try:
        M.require_mediapipe()
    except RuntimeError as e:
        print(f"  mediapipe reference: skipped ({e})")
        return
    from benchmarks.systems.mediapipe_records import run_mediapipe

    print("  mediapipe reference system (pretrained, shared keypoints / person mask)", flush=True)
    for p in run_mediapipe(out, data=data, n=8 if quick else None, input_size_hw=(256, 192)):
        print(f"wrote {p}")


def _print_summary(results) -> None:
    """The probe records under ``results``: headline metric per task with its 95% interval and n."""
    from benchmarks.probe.summary import summary_table
    from leaderboard.results import load_records

    records = load_records([results], skip_foreign=True)
    if any((r.get("protocol") or {}).get("kind") == "probe" for r in records):
        print("\n" + summary_table(records, list(task_names())))


def _comparisons(results, pairs, failed: dict, tasks: str, protocol_id: str) -> tuple[list[dict], list[dict]]:
    """Paired comparisons of ``pairs`` under ``protocol_id``, and the pairs that could not be paired
    (``{"a", "b", "reason"}``: a backbone failed, or the records refuse to pair)."""
    if not pairs:
        return [], []
    from benchmarks.probe.compare import comparisons_from_records
    from leaderboard.results import load_records

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
