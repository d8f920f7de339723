"""Reference implementation of the Sapiens2 pretraining objective.

L = L_MAE + 0.4 L_CL + 0.04 KoLeo: masked-autoencoder reconstruction of per-patch normalised
pixels on 75% mixed blockwise/patchwise masks, DINOv3-style [CLS] self-distillation from an EMA
teacher over 2 global + local crops, and a KoLeo regulariser on the student's [CLS] features.

One file per piece: :mod:`.masking`, :mod:`.encoder` (masked Sapiens2 pass), :mod:`.mae`,
:mod:`.distill` (head, centring, temperatures, EMA), :mod:`.koleo`, :mod:`.crops`, :mod:`.data`,
:mod:`.optim`, :mod:`.model` (the pretrainer), :mod:`.recipes` (configs, hash, named recipes),
:mod:`.state` (checkpoints, export) and :mod:`.trainer`. See docs/pretraining.md.
"""

from sapiens2.pretrain.recipes import config_hash, get_recipe, list_recipes, resolve_config
from sapiens2.pretrain.trainer import pretrain

__all__ = ["config_hash", "get_recipe", "list_recipes", "pretrain", "resolve_config"]

