"""``sapiens2-bench probe``: frozen-backbone dense probing on the five tasks.

Example:
    sapiens2-bench probe --backbone sapiens2_0.1b --tasks pose,seg,normal,pointmap,albedo \\
        --data DIR --out results/ --seeds 0,1,2
    torchrun --nproc_per_node=2 -m benchmarks.cli.main probe --backbone pixels --tasks seg \\
        --data DIR --out OUT
"""

from __future__ import annotations

import argparse

from sapiens2.tasks import task_names


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``probe`` subcommand."""
    p = sub.add_parser(
        "probe",
        help="probe a frozen backbone on the five dense tasks",
        description="Train light decoders on frozen features and evaluate them on the test split; "
        "one result record per (backbone, task, seed) plus mean +- std over seeds. "
        "Run under torchrun for DDP.",
    )
    p.add_argument(
        "--backbone",
        default=None,
        help="preset (sapiens2_0.1b, sapiens_0.3b, dinov2_small, dinov3_vits16, mae_base, clip_b16, "
        "siglip_b16, pixels, ...; '_tiny' variants), a registered PROBE_BACKBONES type, a JSON "
        "config, or gt-oracle",
    )
    p.add_argument(
        "--checkpoint",
        default=None,
        help="backbone weights: a .safetensors/.pth file or a transformers save_pretrained folder",
    )
    p.add_argument("--tasks", default=",".join(task_names()), help="comma-separated tasks")
    p.add_argument("--data", default=None, help="dataset folder (default: the embedded synthetic split)")
    p.add_argument("--out", default="results/probe", help="output folder")
    p.add_argument("--seeds", default="0", help="comma-separated decoder seeds")
    p.add_argument("--protocol", default=None, help="JSON file with ProbeProtocol fields to override")
    p.add_argument(
        "--quick", action="store_true", help="tiny protocol for smoke tests (different protocol_id)"
    )
    p.add_argument("--feature-cache", default=None, help="on-disk feature cache folder")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--list-backbones", action="store_true", help="print the backbone presets and exit")
    p.add_argument("--show-protocol", action="store_true", help="print the protocol and its id and exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def _protocol(args):
    from benchmarks.probe.protocol import ProbeProtocol, default_protocol, quick_protocol
    from sapiens2.utils_io import read_json

    base = quick_protocol() if args.quick else default_protocol()
    if not args.protocol:
        return base
    overrides = read_json(args.protocol)
    if not isinstance(overrides, dict):
        raise ValueError(f"{args.protocol}: expected a JSON object of ProbeProtocol fields")
    merged = {**base.to_dict(), **overrides}
    if "tasks" in overrides:
        merged["tasks"] = {
            **base.to_dict()["tasks"],
            **{k: {**base.to_dict()["tasks"].get(k, {}), **v} for k, v in overrides["tasks"].items()},
        }
    return ProbeProtocol.from_dict(merged)


def default_data_dir(protocol) -> str:
    """The cached embedded synthetic split at the protocol's input size."""
    from sapiens2.datasets.synth import ensure_default_split

    return str(ensure_default_split("probe", 96, tuple(protocol.input_size), 0))


def run(args) -> int:
    """Run the probe; returns the exit code."""
    import json

    from sapiens2 import distributed as dist_utils

    if args.list_backbones:
        from benchmarks.probe.backbones import list_presets

        print("\n".join(list_presets()))
        return 0
    protocol = _protocol(args)
    if args.show_protocol:
        print(json.dumps({"protocol_id": protocol.protocol_id(), **protocol.to_dict()}, indent=2))
        return 0
    if not args.backbone:
        raise ValueError("--backbone is required (see --list-backbones)")
    from benchmarks.probe.api import run_probe

    with dist_utils.process_group(args.device):
        data = args.data or default_data_dir(protocol)
        seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()]
        paths = run_probe(
            args.backbone,
            args.tasks,
            data,
            args.out,
            seeds=seeds,
            protocol=protocol,
            checkpoint=args.checkpoint,
            cache_dir=args.feature_cache,
            device=args.device,
        )
        if dist_utils.is_main():
            _print_summary(paths)
    return 0


def _print_summary(paths) -> None:
    from leaderboard.results import read_record

    headline = {"pose": "AP", "seg": "mIoU", "normal": "normal_mae", "pointmap": "l2_mean", "albedo": "mae"}
    for p in paths:
        rec = read_record(p)
        key = headline[rec["task"]]
        val = rec["metrics"].get(key)
        std = (rec.get("metrics_std") or {}).get(key)
        shown = "n/a" if val is None else f"{val:.4g}" + (f" +- {std:.2g}" if std is not None else "")
        print(f"{rec['model']['name']:>20s} {rec['task']:>9s} seeds={rec['seeds']} {key}={shown}  {p}")
