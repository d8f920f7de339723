"""Backbone weights shipped inside the package, each with its model card.

``sapiens2/weights/<name>.safetensors`` is the exported backbone, ``<name>.json`` its machine-readable
card (recipe, config hash, data seeds, steps, losses, sha256, measured times) and ``<name>.md`` the
human-readable one. The probe knows them by name (``probe --backbone sapiens2_cpu_small``; the
random-init twin is ``sapiens2_cpu_small-random``).

Example:
    >>> "sapiens2_cpu_small" in SHIPPED
    True
    >>> SHIPPED["sapiens2_cpu_small"]
    'cpu_small'
"""

from __future__ import annotations

from pathlib import Path

from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.pretrain.recipes import get_recipe
from sapiens2.utils_io import read_json

WEIGHTS_DIR = Path(__file__).resolve().parent
# shipped backbone name -> the pretraining recipe that makes it (sapiens2.pretrain.recipes)
# sapiens2_cpu_small: the reference objective (MAE + CL + KoLeo); sapiens2_cpu_small_mae: its MAE-only
# ablation, the better features at this scale (docs/pretraining.md). Both have the same random twin.
SHIPPED: dict[str, str] = {"sapiens2_cpu_small": "cpu_small", "sapiens2_cpu_small_mae": "cpu_small_mae"}


def _check(name: str) -> None:
    if name not in SHIPPED:
        raise UnknownNameError("shipped backbone", name, sorted(SHIPPED))


def weights_path(name: str, must_exist: bool = True) -> Path:
    """Path of a shipped backbone's ``.safetensors``.

    Raises:
        UnknownNameError: not a shipped backbone.
        BenchError: the file is missing (says how to make it).
    """
    _check(name)
    path = WEIGHTS_DIR / f"{name}.safetensors"
    if must_exist and not path.is_file():
        raise BenchError(f"shipped weights {path} are missing; make them with "
                         f"`sapiens2-bench pretrain --recipe {SHIPPED[name]} --out OUT` and copy "
                         "OUT/backbone.safetensors there")
    return path


def model_card(name: str) -> dict:
    """The JSON model card of a shipped backbone (read from ``<name>.json``).

    Raises:
        UnknownNameError: not a shipped backbone.
        BenchError: the card is missing or malformed.
    """
    _check(name)
    path = WEIGHTS_DIR / f"{name}.json"
    if not path.is_file():
        raise BenchError(f"model card {path} is missing")
    return read_json(path)


def backbone_config(name: str) -> dict:
    """The ``Sapiens2`` build config of a shipped backbone (from its recipe, no file read).

    Example:
        >>> backbone_config("sapiens2_cpu_small")["patch_size"]
        16
    """
    _check(name)
    return get_recipe(SHIPPED[name])["model"]["backbone"]
