"""Move the flat test modules of ``tests/`` to ``tests/<package>/<area>/``, next to what they test.

Usage (from the repository root)::

    python scripts/organize_tests.py            # move, then fix paths and references
    python scripts/organize_tests.py --dry-run  # print the plan, change nothing

Every file directly in ``tests/`` must be named in :data:`DESTINATIONS`, :data:`SUPPORT` or :data:`STAY`:
an unknown file stops the script before anything moves, naming the file (add it to the table). The
script is idempotent: a file already at its destination is left alone, so it can run again after a
merge brought new flat test files.

After the ``git mv``s it fixes what a deeper folder changes, and only that:

- ``Path(__file__).resolve().parents[k]`` in a moved file gets the extra depth added;
- a ``sys.path.insert(0, str(Path(__file__)...parent))`` line is dropped (``tests/conftest.py`` puts
  ``tests/_support`` on ``sys.path``), and imports left unused by that are removed with ruff;
- ``from test_x import ...`` (one test module reusing another's helpers) becomes
  ``from tests.<area>.test_y import ...`` and ``from conftest import`` becomes ``from tests.conftest import``;
- every ``tests/<old name>.py`` written in the repository's text files (docs, comments, tox.ini) is
  replaced by the new path.

Lines that still look written for the flat folder are listed for a person to check (the script does
not guess).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Flat test module -> its place under tests/ (package, area, then the component it tests).
DESTINATIONS = {
    "test_main_job_budget.py": "benchmarks/speed/test_main_job_budget.py",
    "test_probe_readouts.py": "benchmarks/probe/test_readouts.py",
    "test_split_leaderboards.py": "benchmarks/analysis/test_split_leaderboards.py",
    "test_synth_default_generator.py": "benchmarks/cli/test_synth_default_generator.py",
    "test_synth_realistic_visibility.py": "sapiens2/datasets/synth/realistic/test_visibility.py",
    # sapiens2: models, codecs, datasets, synth, pretrain, records, tasks, weights, package root
    "test_backbones.py": "sapiens2/models/test_backbones.py",
    "test_heads.py": "sapiens2/models/test_heads.py",
    "test_checkpoint.py": "sapiens2/models/test_checkpoint.py",
    "test_convert_hf.py": "sapiens2/models/test_convert_hf.py",
    "test_task_models.py": "sapiens2/models/test_task_models.py",
    "test_model_card.py": "sapiens2/models/test_flops.py",
    "test_variants.py": "sapiens2/models/test_variants.py",
    "test_visualize.py": "sapiens2/models/test_visualize.py",
    "test_udp_codec.py": "sapiens2/codecs/test_udp_codec.py",
    "test_datasets.py": "sapiens2/datasets/test_datasets.py",
    "test_readers.py": "sapiens2/datasets/test_io.py",
    "test_reliability_readers.py": "sapiens2/datasets/test_io_edge_cases.py",
    "test_reliability_limits.py": "sapiens2/datasets/test_size_limits.py",
    "test_format_errors.py": "sapiens2/datasets/test_format_errors.py",
    "test_data_import.py": "sapiens2/datasets/test_importers.py",
    "test_split_identity.py": "sapiens2/datasets/test_identity.py",
    "test_pose_crop_affine.py": "sapiens2/datasets/test_pose_crop_affine.py",
    "test_synth.py": "sapiens2/datasets/synth/test_synth.py",
    "test_synth_shards.py": "sapiens2/datasets/synth/test_shards.py",
    "test_synth_realistic_bodies.py": "sapiens2/datasets/synth/realistic/test_bodies.py",
    "test_synth_realistic_render.py": "sapiens2/datasets/synth/realistic/test_render.py",
    "test_synthetic_data_docs.py": "sapiens2/datasets/synth/realistic/test_limits.py",
    "test_pretrain.py": "sapiens2/pretrain/test_objective.py",
    "test_pretrain_recipes.py": "sapiens2/pretrain/test_recipes.py",
    "test_pretrain_run.py": "sapiens2/pretrain/test_pretrain_end_to_end.py",
    "test_reliability_pretrain.py": "sapiens2/pretrain/test_run_state.py",
    "test_leaderboard.py": "sapiens2/records/test_results.py",
    "test_leaderboard_integrity.py": "sapiens2/records/test_integrity.py",
    "test_record_paths.py": "sapiens2/records/test_paths.py",
    "test_record_view.py": "sapiens2/records/test_view.py",
    "test_task_table.py": "sapiens2/tasks/test_task_table.py",
    "test_shipped_weights.py": "sapiens2/weights/test_shipped_weights.py",
    "test_kernels.py": "sapiens2/test_kernels.py",
    "test_vocab.py": "sapiens2/test_vocab.py",
    "test_reliability_io.py": "sapiens2/test_utils_io_errors.py",
    "test_reliability_outputs.py": "sapiens2/test_output_lock.py",
    # evaluators (dense, shared machinery) and evaluators/pose
    "test_eval_albedo.py": "evaluators/test_albedo.py",
    "test_eval_base.py": "evaluators/test_base.py",
    "test_eval_bootstrap.py": "evaluators/test_bootstrap.py",
    "test_eval_ddp.py": "evaluators/test_ddp.py",
    "test_eval_filters.py": "evaluators/test_filters.py",
    "test_eval_mm_metrics.py": "evaluators/test_mm_metrics.py",
    "test_eval_normal.py": "evaluators/test_normal.py",
    "test_eval_parity.py": "evaluators/test_parity.py",
    "test_eval_pointmap.py": "evaluators/test_pointmap.py",
    "test_reliability_metrics.py": "evaluators/test_pointmap_normals.py",
    "test_eval_runner_index.py": "evaluators/test_runner.py",
    "test_eval_seg.py": "evaluators/test_seg.py",
    "test_metric_decl.py": "evaluators/test_metric_decl.py",
    "test_toy_metric.py": "evaluators/test_metric_decl_toy.py",
    "test_library_references.py": "evaluators/test_library_references.py",
    "test_pose_ap.py": "evaluators/pose/test_coco_ap.py",
    "test_pose_ap_pycocotools.py": "evaluators/pose/test_coco_ap_pycocotools.py",
    "test_pose_evaluator.py": "evaluators/pose/test_evaluator.py",
    "test_pose_json.py": "evaluators/pose/test_coco_json.py",
    "test_pose_metric_vocab.py": "evaluators/pose/test_mm_metric.py",
    "test_pck_mmpose.py": "evaluators/pose/test_pck.py",
    "test_real_formats.py": "evaluators/pose/test_real_formats.py",
    "test_real_pose_eval.py": "evaluators/pose/test_real_annotations.py",
    # leaderboard
    "test_leaderboard_page.py": "leaderboard/test_report_page.py",
    "test_leaderboard_report.py": "leaderboard/test_tables.py",
    "test_leaderboard_standing.py": "leaderboard/test_standing.py",
    "test_report_summary.py": "leaderboard/test_summary_view.py",
    "test_reliability_report.py": "leaderboard/test_report_hostile_records.py",
    "test_reliability_compare.py": "leaderboard/test_comparisons.py",
    "test_browser.py": "leaderboard/test_browser.py",
    # benchmarks: cli, probe (backbones, tasks), reproduce, analysis, speed, systems, package root
    "test_cli_boundary.py": "benchmarks/cli/test_boundary.py",
    "test_cli_errors.py": "benchmarks/cli/test_errors.py",
    "test_cli_help.py": "benchmarks/cli/test_help.py",
    "test_reliability_args.py": "benchmarks/cli/test_argument_checks.py",
    "test_reliability_plugins.py": "benchmarks/cli/test_plugin_errors.py",
    "test_eval_cli.py": "benchmarks/cli/test_eval.py",
    "test_parity_cli.py": "benchmarks/cli/test_parity.py",
    "test_download.py": "benchmarks/cli/test_download.py",
    "test_reliability_download.py": "benchmarks/cli/test_download_limits.py",
    "test_predict.py": "benchmarks/cli/test_predict.py",
    "test_predict_real.py": "benchmarks/cli/test_predict_real.py",
    "test_probe_cli.py": "benchmarks/cli/test_probe_user_backbones.py",
    "test_probe_default_tasks.py": "benchmarks/cli/test_probe_default_tasks.py",
    "test_probe.py": "benchmarks/probe/test_probe.py",
    "test_probe_body_stream.py": "benchmarks/probe/test_body_stream.py",
    "test_probe_ceiling.py": "benchmarks/probe/test_readout_ceiling.py",
    "test_probe_v5.py": "benchmarks/probe/test_readout_nests_floor.py",
    "test_probe_v4.py": "benchmarks/probe/test_headline_and_intervals.py",
    "test_probe_compare.py": "benchmarks/probe/test_compare.py",
    "test_probe_config.py": "benchmarks/probe/test_protocol.py",
    "test_probe_ddp.py": "benchmarks/probe/test_ddp.py",
    "test_probe_e2e.py": "benchmarks/probe/test_end_to_end.py",
    "test_probe_feature_storage.py": "benchmarks/probe/test_feature_storage.py",
    "test_probe_input_errors.py": "benchmarks/probe/test_input_errors.py",
    "test_probe_loader.py": "benchmarks/probe/test_loader.py",
    "test_loader_timeout.py": "benchmarks/probe/test_loader_guard.py",
    "test_probe_realdata.py": "benchmarks/probe/test_real_data.py",
    "test_probe_ridge.py": "benchmarks/probe/test_ridge.py",
    "test_probe_stats_precision.py": "benchmarks/probe/test_ridge_precision.py",
    "test_probe_runs.py": "benchmarks/probe/test_run_keys.py",
    "test_reliability_probe_resume.py": "benchmarks/probe/test_resume.py",
    "test_probe_sample_cache.py": "benchmarks/probe/test_sample_cache.py",
    "test_probe_seed_mean.py": "benchmarks/probe/test_seed_mean.py",
    "test_probe_stream.py": "benchmarks/probe/test_stream.py",
    "test_rank_agreement.py": "benchmarks/probe/test_rank_agreement.py",
    "test_probe_simulated.py": "benchmarks/probe/backbones/test_simulated.py",
    "test_adding_a_backbone.py": "benchmarks/probe/backbones/test_adding_a_backbone.py",
    "test_pose_probe_conventions.py": "benchmarks/probe/tasks/test_pose_conventions.py",
    "test_toy_task.py": "benchmarks/probe/tasks/test_toy_task.py",
    "test_task_plugins.py": "benchmarks/probe/tasks/test_external_task.py",
    "test_leaderboard_reproduce.py": "benchmarks/reproduce/test_reproduce.py",
    "test_reproduce_real.py": "benchmarks/reproduce/test_reproduce_real.py",
    "test_reproduce_table_help.py": "benchmarks/reproduce/test_table_help.py",
    "test_pose_noise_sweep.py": "benchmarks/analysis/test_pose_noise_sweep.py",
    "test_random_convnet.py": "benchmarks/analysis/test_random_convnet.py",
    "test_realism_analysis.py": "benchmarks/analysis/test_realism.py",
    "test_eval_speed_baselines.py": "benchmarks/speed/test_dense_eval_baselines.py",
    "test_probe_memory_smoke.py": "benchmarks/speed/test_probe_memory_smoke.py",
    "test_mediapipe_system.py": "benchmarks/systems/test_mediapipe_system.py",
    "test_docs_tables.py": "benchmarks/test_docs_tables.py",
    # project-wide checks: lint, layering, import cycles, packaging, ecosystem, the skip policy
    "test_lint.py": "project/test_lint.py",
    "test_layers.py": "project/test_layers.py",
    "test_import_cycles.py": "project/test_import_cycles.py",
    "test_install.py": "project/test_install.py",
    "test_ecosystem.py": "project/test_ecosystem.py",
    "test_skip_policy.py": "project/test_skip_policy.py",
    "test_docs_reference_tables.py": "project/test_docs_reference_tables.py",
}

# Helpers imported by name or run as scripts by path: one folder, put on sys.path by tests/conftest.py.
SUPPORT = {
    "_fake_hub.py", "_memory_limit_worker.py", "_naive_readout.py", "_probe_ddp_worker.py",
    "_probe_loud.py", "_probe_toy.py", "_rank_agreement_worker.py", "_realistic_standin.py", "_toy_task.py",
    "browser_driver.py",
}
SUPPORT_DIR = "_support"

# What stays directly in tests/.
STAY = {"conftest.py", "__init__.py", "README.md"}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".sh", ".txt", ".yml", ".yaml", ".rst"}

PARENTS = re.compile(r"Path\(__file__\)(\.resolve\(\))?\.parents\[(\d+)\]")
SYS_PATH_HERE = re.compile(r"^\s*sys\.path\.insert\(0, str\(Path\(__file__\)(\.resolve\(\))?\.parent\)\)\s*$")
TEST_IMPORT = re.compile(r"^(\s*)from (test_\w+) import ", re.MULTILINE)
CONFTEST_IMPORT = re.compile(r"^(\s*)from conftest import ", re.MULTILINE)


def plan_moves(tests: Path) -> tuple[dict[str, str], list[str]]:
    """The moves still to do (old name -> new path under tests/) and the flat files nobody mapped.

    Args:
        tests: The ``tests/`` folder.

    Returns:
        ``(moves, unknown)``: moves for the flat files found, and the sorted names of flat files that are
        in none of the tables.
    """
    moves, unknown = {}, []
    for path in sorted(p for p in tests.iterdir() if p.is_file()):
        name = path.name
        if name in STAY or path.suffix == ".pyc":
            continue
        if name in DESTINATIONS:
            moves[name] = DESTINATIONS[name]
        elif name in SUPPORT:
            moves[name] = f"{SUPPORT_DIR}/{name}"
        else:
            unknown.append(name)
    return moves, unknown


def depth(new: str) -> int:
    """How many folders below ``tests/`` the new path lies (``a/b/test_x.py`` -> 2)."""
    return new.count("/")


def ensure_packages(tests: Path, new: str, dry_run: bool) -> None:
    """Give every folder from ``tests/`` down to the test's own an ``__init__.py`` (not ``_support``).

    The packages give each test module a dotted name under ``tests``, so two modules with the same
    file name in different folders do not collide, and a folder such as ``tests/sapiens2`` never
    shadows the real package (``tests`` itself is never put on ``sys.path``).
    """
    folders = [tests] + [tests.joinpath(*new.split("/")[:i]) for i in range(1, depth(new) + 1)]
    for folder in folders:
        if folder.name == SUPPORT_DIR:
            continue
        init = folder / "__init__.py"
        if not init.exists():
            print(f"  create {init.relative_to(ROOT)}")
            if not dry_run:
                folder.mkdir(parents=True, exist_ok=True)
                init.write_text("")
                subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)


def fix_moved_file(path: Path, extra_depth: int, is_support: bool) -> None:
    """Rewrite the path idioms a deeper folder breaks (what is left, :func:`stale_idioms` lists)."""
    text = path.read_text()

    def deeper(match: re.Match) -> str:
        return f"Path(__file__){match.group(1) or ''}.parents[{int(match.group(2)) + extra_depth}]"

    text = PARENTS.sub(deeper, text)
    lines = text.splitlines(keepends=True)
    if not is_support:  # a helper's own folder is _support itself: its sys.path line stays right
        lines = [line for line in lines if not SYS_PATH_HERE.match(line)]
    path.write_text("".join(lines))


def rewrite_test_imports(tests: Path, dotted: dict[str, str]) -> None:
    """``from test_x import`` -> ``from tests.<area>.test_y import``; ``conftest`` -> ``tests.conftest``."""
    for path in tests.rglob("*.py"):
        text = path.read_text()

        def to_dotted(match: re.Match) -> str:
            module = match.group(2)
            if module not in dotted:
                return match.group(0)
            return f"{match.group(1)}from {dotted[module]} import "

        new = TEST_IMPORT.sub(to_dotted, text)
        if path.parent != tests:
            new = CONFTEST_IMPORT.sub(lambda m: f"{m.group(1)}from tests.conftest import ", new)
        if new != text:
            path.write_text(new)


def all_destinations() -> dict[str, str]:
    """Old flat name -> path under tests/, for every file of the tables (moved now or in an earlier run)."""
    return {**DESTINATIONS, **{name: f"{SUPPORT_DIR}/{name}" for name in SUPPORT}}


def rewrite_references(moved: dict[str, str]) -> list[str]:
    """Replace ``tests/<old>.py`` by the new path in every tracked text file; return the files changed.

    Args:
        moved: Old flat name -> new path under tests/ (all of the tables: a reference to a file moved
            in an earlier run, written since, is fixed too).
    """
    pattern = re.compile(r"tests/(" + "|".join(re.escape(n[:-3]) for n in moved) + r")\.py\b")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    changed = []
    for rel in listed.splitlines():
        path = ROOT / rel
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        text = path.read_text(errors="surrogateescape")
        new = pattern.sub(lambda m: f"tests/{moved[m.group(1) + '.py']}", text)
        if new != text:
            path.write_text(new, errors="surrogateescape")
            changed.append(rel)
    return changed


def dotted_names() -> dict[str, str]:
    """Old module name -> dotted module path, for every mapped test module (moved now or before)."""
    return {old[:-3]: "tests." + new[:-3].replace("/", ".") for old, new in DESTINATIONS.items()}


def drop_unused_imports(paths: list[Path]) -> None:
    """Drop the imports a removed ``sys.path`` line left unused and re-sort them (ruff), if ruff is here."""
    beside_python = Path(sys.executable).with_name("ruff")
    ruff = str(beside_python) if beside_python.exists() else shutil.which("ruff")
    if ruff is None:
        print("ruff not found: run `ruff check --fix --select F401 tests` yourself")
        return
    # I001: the helper imports that followed the dropped line join the sorted import block.
    subprocess.run([ruff, "check", "--fix", "--select", "F401,I001", "--quiet", *map(str, paths)], cwd=ROOT,
                   check=False)


def move(old: str, new: str) -> None:
    """``git mv`` a tracked file (its history follows); an untracked one is renamed in place."""
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", old], cwd=ROOT, capture_output=True)
    if tracked.returncode == 0:
        subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
    else:
        (ROOT / old).rename(ROOT / new)


def stale_idioms(tests: Path) -> list[str]:
    """Lines under ``tests/<area>/`` that still look written for the flat folder (for a person to check).

    A ``sys.path`` insert of the test's own folder, a bare ``from test_x import`` of a module that is
    not beside it, and a ``Path(__file__)`` path that stops inside ``tests/`` without naming
    ``conftest`` or ``_support`` (a flat ``parents[1]`` meant the repository root).
    """
    found = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        if len(rel.parts) == 1 or rel.parts[0] == SUPPORT_DIR:
            continue
        level = len(rel.parts) - 1
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"tests/{rel.as_posix()}:{number}: {line.strip()}"
            bare = TEST_IMPORT.match(line)
            if SYS_PATH_HERE.match(line) or (bare and not (path.parent / f"{bare.group(2)}.py").exists()):
                found.append(where)
            elif "__file__" in line and "conftest" not in line and "_support" not in line:
                ups = [int(k) for _, k in PARENTS.findall(line)]
                if any(k < level + 1 for k in ups) or re.search(r"Path\(__file__\)[^\[]*\.parent\b", line):
                    found.append(where)
    return found


def main(argv: list[str] | None = None) -> int:
    """Plan, check and do the moves; print what moved, what is unknown and what needs a look."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    args = parser.parse_args(argv)

    moves, unknown = plan_moves(TESTS)
    if unknown:
        print("error: flat files in tests/ that scripts/organize_tests.py does not know (add each to "
              "DESTINATIONS, SUPPORT or STAY, then run again); nothing was moved:", file=sys.stderr)
        for name in unknown:
            print(f"  tests/{name}", file=sys.stderr)
        return 1

    moved_paths = []
    for old, new in moves.items():
        target = TESTS / new
        print(f"tests/{old} -> tests/{new}")
        if target.exists():
            print(f"error: tests/{new} exists already; not moving tests/{old} over it", file=sys.stderr)
            return 1
        ensure_packages(TESTS, new, args.dry_run)
        if args.dry_run:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        move(f"tests/{old}", f"tests/{new}")
        fix_moved_file(target, depth(new), is_support=new.startswith(SUPPORT_DIR + "/"))
        moved_paths.append(target)
    if args.dry_run:
        print(f"dry run: {len(moves)} file(s) would move")
        return 0

    # Always (also with nothing left to move): a merge may have brought old names back in.
    rewrite_test_imports(TESTS, dotted_names())
    if moved_paths:
        drop_unused_imports(moved_paths)
    changed = rewrite_references(all_destinations())
    print(f"moved {len(moves)} file(s); references updated in {len(changed)} file(s); "
          "run `ruff check .` (a longer path can make a line too long)")
    review = stale_idioms(TESTS)
    if review:
        print("check these lines by hand (written for the flat tests/ folder?):")
        print("\n".join(f"  {line}" for line in review))
    return 0


if __name__ == "__main__":
    sys.exit(main())
