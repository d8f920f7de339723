"""mmengine registries of sapiens2-bench (scope ``sapiens2``).

Each registry is a child of mmengine's root registry of the same kind, so configs of mmengine,
mmpose or mmseg can name our types with the ``sapiens2.`` prefix, and ``locations`` make
building by type name work without importing the defining modules first.

Example:
    >>> from sapiens2.registry import MODELS
    >>> model = MODELS.build(dict(type="Sapiens2", arch="sapiens2_0.1b", img_size=(64, 48)))
"""

from __future__ import annotations

from mmengine.registry import DATASETS as MM_DATASETS
from mmengine.registry import MODELS as MM_MODELS
from mmengine.registry import TRANSFORMS as MM_TRANSFORMS
from mmengine.registry import Registry

MODELS = Registry(
    "model",
    parent=MM_MODELS,
    scope="sapiens2",
    locations=["sapiens2.models"],
)
DATASETS = Registry(
    "dataset",
    parent=MM_DATASETS,
    scope="sapiens2",
    locations=["sapiens2.datasets"],
)
TRANSFORMS = Registry(
    "transform",
    parent=MM_TRANSFORMS,
    scope="sapiens2",
    locations=["sapiens2.datasets"],
)

def build_from_cfg_checked(registry: Registry, cfg: dict):
    """Build ``cfg`` with ``registry``; an unknown type lists the known ones.

    Args:
        registry: the registry to build from.
        cfg: a config dict with a ``type`` key.

    Returns:
        The built object.

    Raises:
        KeyError: ``type`` is missing or not registered; the message lists the known types.
    """
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise KeyError(f"{registry.name} config needs a 'type' key, got {cfg!r}")
    registry.import_from_location()
    name = cfg["type"]
    if isinstance(name, str) and registry.get(name) is None:
        known = ", ".join(sorted(registry.module_dict))
        raise KeyError(f"unknown {registry.name} type {name!r}; known types: {known}")
    return registry.build(cfg)
