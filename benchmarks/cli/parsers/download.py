"""``sapiens2-bench download``: fetch the official Sapiens2 checkpoints from the Hugging Face Hub.

Repositories: ``facebook/sapiens2-pretrain-{0.1b,0.4b,0.8b,1b,1b-4k,5b}`` (``--pretrain``),
``facebook/sapiens2-{pose,seg,normal,pointmap}-{0.4b,0.8b,1b,5b}`` (``--tasks``) and
``facebook/sapiens-pose-bbox-detector`` (``--detector``). Files go to the Hugging Face cache
(``--cache-dir``) and are linked (``--copy``: copied) to the layout ``reproduce --checkpoint-root``
reads, e.g. ROOT/seg/sapiens2_0.4b_seg.safetensors, only after the checks passed: SHA-256 against the
hub's LFS metadata, a readable safetensors header, the official keys and shapes. Offline
(HF_HUB_OFFLINE=1 or no network) files already in the cache are used; anything else fails with a
message naming the repository and how to place the file by hand. HF_ENDPOINT selects another hub
(a mirror). No public albedo or 1B-4K task checkpoint is known: place those by hand.

Example: sapiens2-bench download --tasks seg,pose --sizes 0.4b --pretrain --checkpoint-root ckpts
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``download`` subcommand."""
    p = sub.add_parser("download", help=command_help("download"), description=__doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="", help="task models: comma list of pose,seg,normal,pointmap or 'all'")
    p.add_argument("--sizes", default="0.4b,0.8b,1b,5b",
                   help="sizes (task models: 0.4b,0.8b,1b,5b; --pretrain also 0.1b and 1b-4k)")
    p.add_argument("--pretrain", action="store_true", help="the pretrained backbones of --sizes")
    p.add_argument("--detector", action="store_true", help="the official pose demo's person detector (.pth)")
    p.add_argument("--checkpoint-root", required=True, help="the folder reproduce --checkpoint-root reads")
    p.add_argument("--cache-dir", default=None, help="Hugging Face cache (default: HF_HUB_CACHE)")
    p.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    p.add_argument("--file", default=None, help="the repository file to fetch (one checkpoint selected only)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long a hub request may wait for an answer (default 30)")
    p.add_argument("--copy", action="store_true", help="copy into the layout instead of linking to the cache")
    p.add_argument("--dry-run", action="store_true", help="list what would be fetched and where it goes")
    p.add_argument("--skip-key-check", action="store_true",
                   help="place a file even if its keys or shapes differ from the official model")
    p.add_argument("--arch-settings", default=None,
                   help="JSON {arch: settings} substituted for official archs in the key check (tests)")
    p.set_defaults(func=handler("download"))
