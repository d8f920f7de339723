"""Pretraining configs: defaults, validation, the config hash and the named recipes.

A config is a plain dict (JSON-compatible). :func:`resolve_config` merges it over
:data:`DEFAULTS` (unknown keys are errors) and :func:`config_hash` hashes everything that changes
the numbers (all but ``name`` and the ``run`` section), so a checkpoint can refuse to resume
under a different config.

Example:
    >>> cfg = get_recipe("smoke_tiny")
    >>> cfg["model"]["backbone"]["patch_size"], len(config_hash(cfg))
    (8, 16)
"""

from __future__ import annotations

import copy
import hashlib
import json
import math

from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.pretrain.synthdata import check_data_spec

DEFAULTS: dict = {
    "name": "custom",
    "seed": 0,
    "steps": 1000,
    "batch_size": 16,  # per rank
    "precision": "fp32",  # or "bf16" (autocast)
    "export": "teacher",  # backbone to ship: the EMA "teacher" (when distilling) or the "student"
    "model": {
        "type": "Sapiens2Pretrainer",
        "backbone": {"type": "Sapiens2", "arch": "sapiens2_0.1b", "img_size": [256, 192]},
        "decoder": {"type": "MAEDecoder", "embed_dims": 512, "num_layers": 8, "num_heads": 16},
        "head": {"type": "DINOHead", "out_dim": 65536, "hidden_dim": 2048, "bottleneck_dim": 256,
                 "num_layers": 3},
        "masking": {"type": "MixedBlockMasking", "ratio": 0.75, "block_prob": 0.4},
        "loss_weights": {"mae": 1.0, "cl": 0.4, "koleo": 0.04},
        "n_global": 2,
        "teacher_momentum": 0.992,
        "center_momentum": 0.9,
        "student_temp": 0.1,
        "teacher_temp": [0.065, 0.07],
        "teacher_temp_warmup_steps": 1000,
    },
    "crops": {
        "global_size": [256, 192],
        "local_size": [112, 80],
        "n_local": 4,
        "global_scale": [0.5, 1.0],
        "local_scale": [0.2, 0.7],
    },
    "optim": {
        "lr": 1e-4,
        "betas": [0.9, 0.95],
        "weight_decay": 0.05,
        "warmup_steps": 1000,
        "min_lr": 1e-7,
        "clip_grad": 5.0,
        # DINO's frozen last layer: the prototypes get no update for this many first steps. Hashed
        # only when set (older configs keep their hash).
        "freeze_prototypes_steps": 0,
    },
    # Named unlabelled data (see sapiens2.pretrain.synthdata), used when no --data folder is given;
    # null: the run needs --data. Hashed only when set (older configs keep their hash).
    "data": None,
    # Not hashed: how the run is carried out, not what it computes.
    "run": {"checkpoint_every": 100, "log_every": 1, "num_workers": 0, "render_workers": 2},
}

# Keys of sections whose contents are validated by a constructor instead of here.
_OPEN_SECTIONS = {("model",), ("model", "backbone"), ("model", "decoder"), ("model", "head"),
                  ("model", "masking"), ("crops",)}

_TINY_ARCH = {"embed_dims": 64, "num_layers": 4, "num_heads": 4, "feedforward_channels": 128}
_SMALL_ARCH = {"embed_dims": 192, "num_layers": 6, "num_heads": 4, "feedforward_channels": 768}
# The CPU recipes' pretraining images: scene seed 1000 of the synthetic generator (the probe's splits
# use seed 0; tests/sapiens2/pretrain/test_recipes.py checks that they stay disjoint), one image per scene.
CPU_DATA = {"source": "synth", "seed": 1000, "n": 6000, "size": [256, 192]}


def _cpu_small(name: str, loss_weights: dict) -> dict:
    """The shipped CPU recipe (and its objective ablations: only ``loss_weights`` differ).

    A 192-wide, 6-block Sapiens2 (3.7M parameters) with patch 16 at the probe's input size 256x192,
    so the pretrained and probed token grids are the same 16x12 (RoPE: nothing to interpolate).
    """
    return {
        "name": name,
        "seed": 0,
        "steps": 300,
        "batch_size": 32,
        "model": {
            "backbone": {"type": "Sapiens2", "arch": dict(_SMALL_ARCH), "img_size": [256, 192],
                         "patch_size": 16},
            "decoder": {"type": "MAEDecoder", "embed_dims": 128, "num_layers": 2, "num_heads": 4},
            "head": {"type": "DINOHead", "out_dim": 4096, "hidden_dim": 512, "bottleneck_dim": 128},
            "loss_weights": dict(loss_weights),
            "teacher_temp_warmup_steps": 100,
        },
        "crops": {"global_size": [256, 192], "local_size": [96, 64], "n_local": 2},
        "optim": {"lr": 1e-3, "warmup_steps": 30, "min_lr": 1e-5, "clip_grad": 3.0},
        "data": dict(CPU_DATA),
        "run": {"checkpoint_every": 20},
    }


RECIPES: dict[str, dict] = {
    # Seconds on a CPU: the tiny arch with patch 8 on 32x24 images (4x3 tokens). For tests.
    "smoke_tiny": {
        "name": "smoke_tiny",
        "seed": 0,
        "steps": 2,
        "batch_size": 4,
        "model": {
            "backbone": {"type": "Sapiens2", "arch": dict(_TINY_ARCH), "img_size": [32, 24], "patch_size": 8},
            "decoder": {"type": "MAEDecoder", "embed_dims": 32, "num_layers": 1, "num_heads": 2},
            "head": {"type": "DINOHead", "out_dim": 64, "hidden_dim": 64, "bottleneck_dim": 32},
            "teacher_temp_warmup_steps": 1,
        },
        "crops": {"global_size": [32, 24], "local_size": [16, 16], "n_local": 2},
        "optim": {"lr": 1e-3, "warmup_steps": 1, "min_lr": 1e-6},
        "run": {"checkpoint_every": 1},
    },
    # The shipped CPU backbone (docs/pretraining.md, sapiens2/weights/) and its objective ablations.
    "cpu_small": _cpu_small("cpu_small", {"mae": 1.0, "cl": 0.4, "koleo": 0.04}),
    "cpu_small_mae": _cpu_small("cpu_small_mae", {"mae": 1.0, "cl": 0.0, "koleo": 0.0}),
    "cpu_small_cl": _cpu_small("cpu_small_cl", {"mae": 0.0, "cl": 0.4, "koleo": 0.04}),
    # The paper's 1B recipe (App. A.1.1) as far as it is published. Not runnable on a CPU.
    # Assumed where the paper is silent: batch size per rank, local crop size (the DINOv2 ratio
    # 96/224 of the global side, rounded to the patch), and the head sizes (DINOv2 defaults).
    "paper_1b": {
        "name": "paper_1b",
        "seed": 0,
        "steps": 500_000,
        "batch_size": 8,
        "precision": "bf16",
        "model": {
            "backbone": {"type": "Sapiens2", "arch": "sapiens2_1b", "img_size": [1024, 768]},
            "teacher_temp_warmup_steps": 1000,
        },
        "crops": {"global_size": [1024, 768], "local_size": [448, 336], "n_local": 4},
        "optim": {"lr": 1e-4, "warmup_steps": 1000, "min_lr": 1e-7, "clip_grad": 5.0},
        "run": {"checkpoint_every": 1000},
    },
}


def list_recipes() -> list[str]:
    """Names of the built-in recipes."""
    return sorted(RECIPES)


def get_recipe(name: str) -> dict:
    """A resolved copy of a built-in recipe.

    Raises:
        UnknownNameError: unknown name (lists the known ones).
    """
    if name not in RECIPES:
        raise UnknownNameError("pretraining recipe", name, list_recipes())
    return resolve_config(RECIPES[name])


def _merge(base: dict, override: dict, path: tuple) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        where = ".".join(path + (key,))
        if key not in base and path not in _OPEN_SECTIONS:
            raise BenchError(f"pretraining config: unknown key {where!r}; known keys here: "
                             f"{', '.join(sorted(base))}")
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            if "type" in value and value.get("type") != base[key].get("type"):
                out[key] = copy.deepcopy(value)  # another type: its own arguments only
            else:
                out[key] = _merge(base[key], value, path + (key,))
        else:
            out[key] = copy.deepcopy(value)
    return out


def _pair(cfg: dict, section: str, key: str) -> None:
    v = cfg[section][key]
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        raise BenchError(f"pretraining config: {section}.{key} must be a pair, got {v!r}")
    cfg[section][key] = list(v)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_optim_numbers(optim: dict) -> None:
    """Every optimiser setting is a finite number (a string such as ``"fast"`` fails here, not in AdamW)."""
    for key in ("lr", "weight_decay", "min_lr", "clip_grad", "warmup_steps"):
        if key in optim and not (_number(optim[key]) and optim[key] >= 0):
            raise BenchError(f"pretraining config: optim.{key} must be a finite number >= 0, "
                             f"got {optim[key]!r}")
    betas = optim.get("betas")
    if betas is not None and not (isinstance(betas, (list, tuple)) and len(betas) == 2
                                  and all(_number(b) and 0 <= b < 1 for b in betas)):
        raise BenchError(f"pretraining config: optim.betas must be two numbers in [0, 1), got {betas!r}")


def resolve_config(config: dict) -> dict:
    """Merge ``config`` over :data:`DEFAULTS` and check it.

    Args:
        config: a (partial) config dict.

    Returns:
        The full config (a new dict).

    Raises:
        BenchError: unknown keys, wrong types or values; the message names the key.
    """
    if not isinstance(config, dict):
        raise BenchError(f"pretraining config must be a dict, got {type(config).__name__}")
    cfg = _merge(DEFAULTS, config, ())
    for key in ("seed", "steps", "batch_size"):
        low = 0 if key == "seed" else 1
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < low:
            raise BenchError(f"pretraining config: {key} must be an int >= {low}, got {cfg[key]!r}")
    if cfg["precision"] not in ("fp32", "bf16"):
        raise BenchError(f"pretraining config: precision must be 'fp32' or 'bf16', got {cfg['precision']!r}")
    if cfg["export"] not in ("teacher", "student"):
        raise BenchError(f"pretraining config: export must be 'teacher' or 'student', got {cfg['export']!r}")
    for key in ("global_size", "local_size", "global_scale", "local_scale"):
        _pair(cfg, "crops", key)
    weights = cfg["model"].get("loss_weights") or {}
    if weights.get("koleo", 0) > 0 and cfg["batch_size"] < 2:
        raise BenchError("pretraining config: KoLeo (loss_weights.koleo > 0) needs batch_size >= 2 per rank")
    if weights.get("cl", 0) > 0 and cfg["crops"]["n_local"] == 0 and cfg["model"]["n_global"] < 2:
        raise BenchError("pretraining config: the distillation needs 2 global views or local views")
    if cfg["data"] is not None:
        cfg["data"] = check_data_spec(cfg["data"])
    _check_optim_numbers(cfg["optim"])
    frozen = cfg["optim"]["freeze_prototypes_steps"]
    if not isinstance(frozen, int) or isinstance(frozen, bool) or frozen < 0:
        raise BenchError(f"pretraining config: optim.freeze_prototypes_steps must be an int >= 0, "
                         f"got {frozen!r}")
    for key in ("checkpoint_every", "log_every", "render_workers"):
        if not isinstance(cfg["run"][key], int) or cfg["run"][key] < 1:
            raise BenchError(f"pretraining config: run.{key} must be a positive int, got {cfg['run'][key]!r}")
    return json.loads(json.dumps(cfg))  # plain JSON types (tuples -> lists)


def config_hash(cfg: dict) -> str:
    """16 hex digits of the SHA-256 of the resolved config without ``name`` and ``run``
    (and without ``data`` when it is null, ``optim.freeze_prototypes_steps`` when it is 0)."""
    resolved = resolve_config(cfg)
    hashed = {k: v for k, v in resolved.items() if k not in ("name", "run")}
    if hashed["data"] is None:
        del hashed["data"]
    if not hashed["optim"]["freeze_prototypes_steps"]:
        del hashed["optim"]["freeze_prototypes_steps"]
    text = json.dumps(hashed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
