"""Reference models: backbones, task heads and estimators (registered in ``sapiens2.registry.MODELS``).

Importing this package registers every model type, as the registry's ``locations`` expect.
"""

import importlib

from . import backbones  # noqa: F401

# Sibling modules written in parallel; a missing one is skipped, any other import error surfaces.
for _name in ("heads", "estimators"):
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _err:
        if _err.name != f"{__name__}.{_name}":
            raise
del _name
