"""``sapiens2-bench convert IN OUT --to {hf,official}``: translate checkpoints to and from ``transformers``.

``--to hf`` writes a folder (``model.safetensors`` in the ``transformers`` key layout and ``config.json``
from ``Sapiens2Config``) that ``Sapiens2Model`` / ``Sapiens2For*.from_pretrained(OUT)`` loads offline.
``--to official`` writes one ``.safetensors`` file in the official key layout (and ``OUT`` with suffix
``.config.json``: the official config read off the tensor shapes).
"""

from __future__ import annotations

import argparse

from benchmarks.cli.commands import command_help, handler
from sapiens2.tasks import model_task_names


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``convert`` subcommand."""
    p = sub.add_parser("convert", help=command_help("convert"),
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="official .safetensors/.pth file, or a transformers folder or .safetensors")
    p.add_argument("output", help="--to hf: output folder; --to official: output .safetensors file")
    p.add_argument("--to", required=True, choices=("hf", "official"), help="target layout")
    p.add_argument("--task", choices=("backbone", *model_task_names()),
                   help="model kind (default: detected from the keys)")
    p.add_argument("--config", help="official config JSON (estimator or backbone dict) for config.json; "
                   "default: read off the tensor shapes")
    p.add_argument("--img-size", default=None, help="HxW recorded in the configs (default: the input "
                   "transformers config's image_size, else 1024x768)")
    p.add_argument("--rope-dtype", choices=("bfloat16", "float32"), default=None,
                   help="--to official: dtype of the restored rope_embed.periods (bf16 = official default "
                   "RoPE); default: the dtype recorded in the input's metadata, else bfloat16")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=handler("convert"))
