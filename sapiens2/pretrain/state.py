"""Training-state checkpoints (resume) and the exported backbone (``.safetensors``).

``train_state.pt`` holds the whole pretrainer (student, decoder, head, EMA teacher, centre), the
optimiser state, the step, the world size and the config hash; it is written atomically and read
with ``torch.load(weights_only=True)``. ``backbone.safetensors`` holds one backbone's state dict
with the official key layout (``cls_token``, ``blocks.N...``), so ``build_model`` +
``load_checkpoint`` and ``probe --checkpoint`` load it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from sapiens2.errors import BenchError
from sapiens2.utils_io import atomic_write, file_sha256, write_json_atomic

STATE_FORMAT = "sapiens2-pretrain-state/1"
BACKBONE_FORMAT = "sapiens2-pretrain-backbone/1"
STATE_FILE = "train_state.pt"
BACKBONE_FILE = "backbone.safetensors"
BACKBONE_CARD = "backbone.json"


def run_key(run: dict) -> str:
    """A short key of a run identity (16 hex digits), written on every log row.

    Example:
        >>> run_key({"config_hash": "ab", "seed": 0}) == run_key({"seed": 0, "config_hash": "ab"})
        True
    """
    import hashlib

    return hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:16]


def check_run(state: dict, run: dict, path: Path) -> None:
    """Refuse to resume ``state`` (read from ``path``) in a run of another identity.

    Raises:
        BenchError: the state names no identity, or another one; the message says what differs.
    """
    have = state.get("run")
    if not isinstance(have, dict):
        raise BenchError(f"cannot resume: {path} records no run identity (data, recipe, seed), so it "
                         "cannot be checked against this run's images; start again in another --out")
    diff = [f"{k}: {have.get(k)!r} in the state, {v!r} now" for k, v in run.items() if have.get(k) != v]
    if diff:
        raise BenchError(f"cannot resume: {path} belongs to another run (" + "; ".join(diff) + "); use the "
                         "same --data, recipe and seed, or another --out")


def _check_finite(model: nn.Module, step: int, path: Path) -> None:
    bad = [k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise BenchError(f"pretraining step {step}: non-finite weights ({', '.join(bad[:4])}"
                         f"{', ...' if len(bad) > 4 else ''}); not written to {path}, which keeps the last "
                         "finite state")


def save_state(path: Path, *, model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
               config: dict, config_hash: str, world_size: int, run: dict | None = None) -> Path:
    """Write the training state atomically (never a non-finite one).

    Raises:
        BenchError: a weight is NaN or infinite; nothing is written.
    """
    _check_finite(model, step, path)
    state = {
        "run": run,
        "format": STATE_FORMAT,
        "step": int(step),
        "world_size": int(world_size),
        "config_hash": config_hash,
        "config_json": json.dumps(config, sort_keys=True),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }
    return atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_state(path: Path, config_hash: str, world_size: int) -> dict:
    """Read a training state and check that it belongs to this run.

    Raises:
        BenchError: missing or unreadable file, another format, another config (hash) or another
            number of processes.
    """
    if not path.is_file():
        raise BenchError(f"cannot resume: {path} does not exist (run without --resume to start)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise BenchError(f"cannot resume: {path} is not a readable training state ({e})") from e
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise BenchError(f"cannot resume: {path} is not a {STATE_FORMAT} file")
    if state["config_hash"] != config_hash:
        other = json.loads(state["config_json"]).get("name", "?")
        raise BenchError(
            f"cannot resume: {path} was written by config {other!r} (hash {state['config_hash']}), but this "
            f"run's config has hash {config_hash}; use the same config or another --out")
    if state["world_size"] != world_size:
        raise BenchError(f"cannot resume: {path} was written with {state['world_size']} process(es), this "
                         f"run has {world_size}; the global batch would change")
    return state


def probe_spec(backbone_cfg: dict, name: str) -> dict:
    """The ``probe --backbone`` JSON spec that rebuilds this backbone (``Sapiens2Probe``).

    Args:
        backbone_cfg: the backbone's build config.
        name: label of the probe's records and output folder.
    """
    kwargs = {k: v for k, v in backbone_cfg.items() if k not in ("type", "img_size")}
    return {"type": "Sapiens2Probe", "name": name, **kwargs}


def export_backbone(out_dir: Path, backbone: nn.Module, backbone_cfg: dict, *, which: str, step: int,
                    config: dict, config_hash: str, run: dict | None = None) -> Path:
    """Write ``backbone.safetensors`` and its card ``backbone.json`` atomically.

    Returns:
        The path of the weights.
    """
    from safetensors.torch import save_file

    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in backbone.state_dict().items()}
    info = {"format": BACKBONE_FORMAT, "recipe": config.get("name"), "config_hash": config_hash,
            "step": int(step), "exported": which, "backbone_config": backbone_cfg}
    # One metadata key: safetensors writes several keys in hash-map order, which differs between
    # processes, and the file's bytes (and sha256) should be a function of the weights and the run.
    metadata = {"sapiens2_pretrain": json.dumps(info, sort_keys=True)}
    path = atomic_write(out_dir / BACKBONE_FILE, lambda tmp: save_file(tensors, tmp, metadata=metadata))
    card = {
        "format": BACKBONE_FORMAT,
        "weights": BACKBONE_FILE,
        "sha256": file_sha256(path),
        "recipe": config.get("name"),
        "config_hash": config_hash,
        "run": run,
        "step": int(step),
        "steps": int(config["steps"]),
        "exported": which,
        "backbone_config": backbone_cfg,
        "probe_backbone": probe_spec(backbone_cfg, f"pretrain_{config.get('name')}"),
        "params": int(sum(p.numel() for p in backbone.parameters())),
    }
    write_json_atomic(out_dir / BACKBONE_CARD, card)
    return path
