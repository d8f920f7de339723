"""The handler of ``sapiens2-bench convert``: ``run(args)``, imported only when the command runs.

Its arguments and help text: :mod:`benchmarks.cli.parsers.convert`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sapiens2.models import convert_hf as C
from sapiens2.models import hf_config as H
from sapiens2.models.checkpoint import load_state_dict_file
from sapiens2.models.convert_hf import HF_CLASSES, ConversionError
from sapiens2.utils_io import atomic_write, read_json, write_json_atomic, write_text_atomic

HF_WEIGHTS = "model.safetensors"


# Sapiens2's patch size (every official arch) and the largest side accepted: the 4K models take
# 4096 x 3072, and 160000 x 160000 would ask for tens of GB before anything useful happens.
PATCH_SIZE = 16
MAX_SIDE = 8192


def parse_hw(text: str, flag: str = "image size", multiple: int = 1) -> tuple[int, int]:
    """Parse ``'HxW'`` into (H, W), each in 1..:data:`MAX_SIDE` and a multiple of ``multiple``.

    Raises:
        ValueError: naming ``flag``, the value and what is expected.

    Example:
        >>> parse_hw("1024x768")
        (1024, 768)
    """
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected HxW, e.g. 1024x768") from None
    if not (0 < h <= MAX_SIDE and 0 < w <= MAX_SIDE):
        raise ValueError(f"{flag} {text!r}: each side must be in 1..{MAX_SIDE} pixels")
    if h % multiple or w % multiple:
        lo = "x".join(str(max(multiple, v // multiple * multiple)) for v in (h, w))
        hi = "x".join(str(-(-v // multiple) * multiple) for v in (h, w))
        raise ValueError(f"{flag} {text!r}: H and W must be multiples of the patch size {multiple} "
                         f"(e.g. {lo} or {hi})")
    return h, w


def read_checkpoint(path: Path) -> tuple[dict, dict, dict | None]:
    """Read (state_dict, safetensors metadata, transformers config dict or None) from a file or HF folder."""
    from safetensors import safe_open

    config = None
    if path.is_dir():
        cfg_path = path / "config.json"
        if cfg_path.is_file():
            config = read_json(cfg_path)
        path = path / HF_WEIGHTS
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a transformers folder needs {HF_WEIGHTS} (sharded weights "
                                    "are not supported)")
    state = load_state_dict_file(path)
    meta = {}
    if path.suffix == ".safetensors":
        with safe_open(str(path), "pt") as f:
            meta = dict(f.metadata() or {})
    return state, meta, config


def run(args: argparse.Namespace) -> int:
    """Convert ``args.input`` to ``args.output``; returns the exit code."""
    from safetensors.torch import save_file

    src, dst = Path(args.input), Path(args.output)
    if args.img_size:
        parse_hw(args.img_size, "--img-size", PATCH_SIZE)  # before any work
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    state, meta, hf_cfg = read_checkpoint(src)
    layout = C.detect_layout(state)
    task = args.task or C.detect_task(state)

    if args.to == "hf":
        if layout == "hf":
            raise ValueError(f"{src}: already in the transformers layout")
        hf_state, new_meta = C.official_to_hf(state, task)
        size = parse_hw(args.img_size or "1024x768")
        cfg = read_json(args.config) if args.config else H.infer_official_config(state, task, size)
        config = H.hf_config_from_official(cfg, task)
        _check_loads_strictly(config, hf_state, task)
        hf_state = {k: v.contiguous() for k, v in hf_state.items()}
        metadata = {"format": "pt", **new_meta}
        atomic_write(dst / HF_WEIGHTS, lambda tmp: save_file(hf_state, tmp, metadata=metadata))
        write_text_atomic(dst / "config.json", config.to_json_string())
        write_json_atomic(dst / "preprocessor_config.json", H.hf_preprocessor_config(config.image_size))
        print(f"wrote {dst / HF_WEIGHTS} ({len(hf_state)} tensors, {C.HF_CLASSES[task]}), "
              f"{dst / 'config.json'} and {dst / 'preprocessor_config.json'}")
        return 0

    if layout == "official":
        raise ValueError(f"{src}: already in the official layout (note: transformers' save_pretrained writes "
                         "official key names itself)")
    rope_dtype = args.rope_dtype or meta.get(C.ROPE_DTYPE_KEY, "bfloat16")
    theta = float((hf_cfg or {}).get("rope_theta", 100.0))
    official = C.hf_to_official(state, task, rope_theta=theta, rope_dtype=rope_dtype)
    official = {k: v.contiguous() for k, v in official.items()}
    if dst.suffix != ".safetensors":
        raise ValueError(f"{dst}: --to official writes one .safetensors file; give a path ending in "
                         ".safetensors")
    atomic_write(dst, lambda tmp: save_file(official, tmp, metadata={"format": "pt"}))
    hf_size = (hf_cfg or {}).get("image_size") or (1024, 768)
    size = parse_hw(args.img_size) if args.img_size else tuple(hf_size)
    cfg = H.infer_official_config(official, task, size)
    cfg_path = dst.with_suffix(".config.json")
    write_json_atomic(cfg_path, cfg)
    rope_note = "bf16 RoPE (official default)" if rope_dtype == "bfloat16" else "fp32 RoPE"
    print(f"wrote {dst} ({len(official)} tensors, periods for {rope_note}) and {cfg_path}")
    return 0


def _check_loads_strictly(config, hf_state: dict, task: str) -> None:
    """Build the transformers model on the meta device and compare keys and shapes with ``hf_state``."""
    import torch
    from transformers.models.sapiens2 import modeling_sapiens2

    with torch.device("meta"):
        model = getattr(modeling_sapiens2, HF_CLASSES[task])(config)
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(own) - set(hf_state))
    unexpected = sorted(set(hf_state) - set(own))
    wrong = sorted(f"{k} {tuple(v.shape)} vs {own[k]}" for k, v in hf_state.items()
                   if k in own and tuple(v.shape) != own[k])
    if missing or unexpected or wrong:
        raise ConversionError(
            f"converted weights do not fit {HF_CLASSES[task]} built from the config: {len(missing)} missing "
            f"{missing[:5]}, {len(unexpected)} unexpected {unexpected[:5]}, wrong shapes {wrong[:5]}"
        )
