"""Backbones: Sapiens2 (every official arch, the 4K tokenizer variant) and Sapiens v1.

Both are registered in :data:`sapiens2.registry.MODELS` and share one contract: ``forward(x)``
returns a tuple with one output per out index, ``forward_intermediates(x, indices)`` returns
feature maps and CLS tokens for probing, and ``valid_input_size(h, w)`` validates input sizes.
"""

from .common import OFFICIAL_BACKBONES, arch_settings, list_archs
from .sapiens2 import Sapiens2, kv_heads_per_layer
from .sapiens_v1 import Sapiens

__all__ = ["OFFICIAL_BACKBONES", "Sapiens", "Sapiens2", "arch_settings", "kv_heads_per_layer", "list_archs"]
