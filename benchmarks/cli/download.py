"""The handler of ``sapiens2-bench download``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.download`.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.cli.reproduce import _arch_settings
from benchmarks.reproduce import hub
from benchmarks.reproduce.hub import plan_items
from benchmarks.reproduce.sources import HUB_TASKS
from sapiens2.errors import BenchError


def _split(value: str) -> list[str]:
    return [v.strip().lower() for v in value.split(",") if v.strip()]


def run(args: argparse.Namespace) -> int:
    """Fetch, verify and place every selected checkpoint; returns 1 if any failed."""
    tasks = list(HUB_TASKS) if _split(args.tasks) == ["all"] else _split(args.tasks)
    sizes = _split(args.sizes)
    items = plan_items(args.checkpoint_root, tasks, sizes if tasks else [],
                       sizes if args.pretrain else [], args.detector)
    if not items:
        raise BenchError("nothing selected: pass --tasks, --pretrain and/or --detector")
    if args.file and len(items) != 1:
        raise ValueError(f"--file names one repository file, but {len(items)} checkpoints are selected")
    if args.file:
        hub.check_repo_file(args.file)
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    settings = _arch_settings(args.arch_settings)
    failures = []
    for i, item in enumerate(items, 1):
        print(f"[{i}/{len(items)}] {item.label}: {item.repo_id}", flush=True)
        try:
            _one(item, args, settings)
        except BenchError as e:
            failures.append((item.repo_id, e))
            print(f"  failed: {e}", flush=True)
    done = len(items) - len(failures)
    print(f"\n{done} of {len(items)} {'listed' if args.dry_run else 'in place'} under {args.checkpoint_root}")
    if failures:
        names = ", ".join(label for label, _ in failures)
        print(f"sapiens2-bench download: error: {len(failures)} of {len(items)} failed ({names}; the reasons "
              f"are above); nothing partial or unverified was placed under {args.checkpoint_root}",
              file=sys.stderr)
        return 1
    return 0


def _one(item, args, settings) -> None:
    from huggingface_hub.errors import HfHubHTTPError

    reason = "HF_HUB_OFFLINE=1 is set" if hub._offline_env() else None
    if reason is None:
        try:
            hub.resolve_remote(item, args.revision, args.file, timeout=args.timeout)
        except HfHubHTTPError as e:
            if not hub._is_network_error(e):
                raise hub._hub_error(item, e) from e
            reason = f"no network: {e}"
        except Exception as e:
            if not hub._is_network_error(e):
                raise
            reason = f"no network: {type(e).__name__}: {e}"
            if "timeout" in type(e).__name__.lower():
                reason = f"no answer within {args.timeout:g} s (--timeout): {type(e).__name__}: {e}"
    if reason is not None:
        cached = hub.find_in_cache(item, args.revision, args.cache_dir, args.file)
        if cached is None and args.dry_run:  # offline, a dry run still lists what it would fetch
            print(f"  hub unreachable ({reason.split(':')[0]}), not cached: would fetch its checkpoint "
                  f"(file name resolved online) -> {item.target}", flush=True)
            return
        if cached is None:
            raise hub.unavailable(item, reason, args.cache_dir)
        print(f"  hub unreachable ({reason.split(':')[0]}); using the cached {cached}", flush=True)
    else:
        size = f"{item.nbytes / 1e9:.3f} GB" if item.nbytes else "size unknown"
        print(f"  file {item.filename} ({size}) -> {item.target}", flush=True)
        if args.dry_run:
            return
        try:
            cached = hub.fetch_to_cache(item, args.revision, args.cache_dir, timeout=args.timeout)
        except Exception as e:
            if not hub._is_network_error(e):
                raise
            raise hub.HubUnavailableError(
                f"{item.repo_id}: download of {item.filename} failed ({type(e).__name__}: {e}); the partial "
                f"file stays in the cache and the next run resumes it; nothing was placed at {item.target}"
            ) from e
    if args.dry_run:
        print(f"  would place it at {item.target}")
        return
    print("  verifying ...", flush=True)
    checks = hub.verify(item, cached, settings, check_keys=not args.skip_key_check)
    print(f"  verified: {', '.join(checks) or 'nothing to check'}")
    for note in item.notes:
        print(f"  note: {note}")
    print(f"  {hub.place(cached, item.target, args.copy)}", flush=True)
