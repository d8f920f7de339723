"""Reference models: backbones, task heads and estimators (registered in ``sapiens2.registry.MODELS``).

Importing this package registers every model type, as the registry's ``locations`` expect.
"""

from . import backbones, estimators, heads  # noqa: F401
