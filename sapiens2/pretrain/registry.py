"""Registry of the pretraining pieces (scope ``sapiens2_pretrain``).

``PRETRAIN_MODELS`` is a child of :data:`sapiens2.registry.MODELS`, so one config dict can name
the pretraining modules (``Sapiens2Pretrainer``, ``MAEDecoder``, ``DINOHead``,
``MixedBlockMasking``) and the backbones (``Sapiens2``) alike.

Example:
    >>> from sapiens2.pretrain.registry import PRETRAIN_MODELS, build
    >>> build(dict(type="MixedBlockMasking", ratio=0.75)).ratio
    0.75
"""

from __future__ import annotations

from mmengine.registry import Registry

from sapiens2.errors import UnknownNameError
from sapiens2.registry import MODELS, build_from_cfg_checked

PRETRAIN_MODELS = Registry(
    "pretrain model",
    parent=MODELS,
    scope="sapiens2_pretrain",
    locations=["sapiens2.pretrain.masking", "sapiens2.pretrain.mae", "sapiens2.pretrain.distill",
               "sapiens2.pretrain.model"],
)


def build(cfg: dict, **extra):
    """Build ``cfg`` (plus ``extra`` keyword arguments) from :data:`PRETRAIN_MODELS`.

    Args:
        cfg: a config dict with ``type`` (a pretraining type or any ``sapiens2`` model type).
        **extra: arguments the caller derives (e.g. the backbone's width), added to ``cfg``.

    Returns:
        The built object.

    Raises:
        UnknownNameError: an unknown type; the message lists the known ones (of both registries).
    """
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise KeyError(f"pretrain model config needs a 'type' key, got {cfg!r}")
    MODELS.import_from_location()
    PRETRAIN_MODELS.import_from_location()
    if isinstance(cfg["type"], str) and PRETRAIN_MODELS.get(cfg["type"]) is None:
        known = sorted(set(PRETRAIN_MODELS.module_dict) | set(MODELS.module_dict))
        raise UnknownNameError("pretrain model type", cfg["type"], known)
    return build_from_cfg_checked(PRETRAIN_MODELS, {**cfg, **extra})
