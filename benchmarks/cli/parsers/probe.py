"""``sapiens2-bench probe``: frozen-backbone dense probing on the five tasks.

Example:
    sapiens2-bench probe --backbone sapiens2_0.1b --tasks pose,seg,normal,pointmap,albedo \
        --data DIR --out results/ --seeds 0,1,2
    sapiens2-bench probe --include my_backbones.py --backbone MeanColourPatches --data DIR
    sapiens2-bench probe --backbone mypackage.backbones:MyViT --weights my_vit.safetensors
    torchrun --nproc_per_node=2 -m benchmarks.cli.main probe --backbone pixels --tasks seg \
        --data DIR --out OUT
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``probe`` subcommand."""
    p = sub.add_parser(
        "probe",
        help=command_help("probe"),
        description="Fit a closed-form linear probe per task on frozen features (a per-pixel train "
        "prior plus ridge, streamed batch by batch so memory does not grow with the images; the "
        "trained decoder body is the body_protocol() variant, via --protocol, its train split spilled to "
        "disk and read back by batch) and evaluate it on the test "
        "split with 95% bootstrap intervals; one result record per (backbone, task, seed) plus mean +- "
        "std over seeds. Run under torchrun for DDP.",
    )
    p.add_argument(
        "--backbone",
        default=None,
        help="preset (sapiens2_0.1b, sapiens_0.3b, dinov2_small, dinov3_vits16, mae_base, clip_b16, "
        "siglip_b16, pixels, ...; '_tiny' variants; see --list-backbones), a registered PROBE_BACKBONES "
        "type, package.module:ClassName (a ProbeBackbone subclass), a JSON config whose 'type' is one of "
        "those, gt-oracle (features = the ground truth) or floor (no features: the per-pixel train prior)",
    )
    p.add_argument(
        "--weights",
        default=None,
        metavar="PATH",
        help="backbone weights: a .safetensors/.pth file or a transformers save_pretrained folder "
        "(the flag `run` uses too; NAME=PATH with NAME the --backbone is accepted)",
    )
    p.add_argument("--checkpoint", default=None, metavar="PATH", help="deprecated alias of --weights")
    p.add_argument("--tasks", default=None,
                   help="comma-separated tasks (default: every task whose ground truth the data has; "
                   "the command names the ones it skips)")
    p.add_argument("--data", default=None, help="dataset folder (default: the embedded synthetic split)")
    p.add_argument("--generator", default=None,
                   help="the embedded split's generator when no --data: realistic (default) or procedural "
                        "(the default under --quick)")
    p.add_argument("--out", default="results/probe", help="output folder")
    p.add_argument("--seeds", default="0", help="comma-separated decoder seeds")
    p.add_argument("--protocol", default=None, help="JSON file with ProbeProtocol fields to override")
    p.add_argument(
        "--quick", action="store_true", help="tiny protocol for smoke tests (different protocol_id)"
    )
    p.add_argument("--feature-cache", default=None,
                   help="on-disk feature cache folder (without it a trained body spills its train "
                   "features to OUT/<backbone>/.scratch)")
    p.add_argument("--sample-cache", default=None,
                   help="folder keeping the prepared samples (decoded images, maps, pose crops) on disk, "
                   "so that later probes of other backbones on the same data read them back")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--workers", type=int, default=0,
                   help="data-loader worker processes reading the scenes (default 0: read in this process)")
    p.add_argument("--loader-timeout", type=float, default=None, metavar="SECONDS",
                   help="with --workers: end the run, naming the worker and its files, when no batch comes "
                   "for this long (default $SAPIENS2_LOADER_TIMEOUT, else 600; 0: wait forever)")
    p.add_argument(
        "--list-backbones",
        action="store_true",
        help="print every backbone name with its family, parameter count and whether it needs weights",
    )
    p.add_argument("--show-protocol", action="store_true",
                   help="print the protocol, each task's protocol id and the knobs it covers, and exit")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("probe"))
