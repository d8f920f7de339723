"""Golden-case handler for ``kind: model`` cases (backbones and task models).

A case file holds ``state_dict.<key>`` tensors, ``input`` and ``output.<name>`` tensors. The model is
built from the case's ``official_config`` (arch names found in the manifest's ``arch_settings`` are
replaced by their settings dict), loaded strictly, run in eval mode in float32, and every expected
output is compared with ``tolerance.abs``.

Output names: ``raw_layer{i}`` / ``featmap_layer{i}`` / ``cls_token_layer{i}`` are the backbone's
``out_type`` output after block ``i``; ``featmap_last`` / ``cls_token_last`` the output of the last out
index; ``out{j}`` the j-th output of a task model's forward.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import torch

from sapiens2.parity.runner import CaseResult
from sapiens2.registry import MODELS, build_from_cfg_checked

_LAYER_RE = re.compile(r"^(raw|featmap|cls_token)_(layer(\d+)|last)$")
_OUT_RE = re.compile(r"^out(\d+)$")


def _substitute_arch(cfg: dict, arch_settings: dict) -> dict:
    cfg = copy.deepcopy(cfg)
    for node in (cfg, cfg.get("backbone")):
        if isinstance(node, dict) and isinstance(node.get("arch"), str) and node["arch"] in arch_settings:
            node["arch"] = dict(arch_settings[node["arch"]])
    return cfg


def split_case_file(path: Path) -> tuple[dict, torch.Tensor, dict]:
    """Read a golden case file into (state_dict, input, expected outputs)."""
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    state = {k[len("state_dict."):]: v for k, v in tensors.items() if k.startswith("state_dict.")}
    outputs = {k[len("output."):]: v for k, v in tensors.items() if k.startswith("output.")}
    if "input" not in tensors:
        raise ValueError(f"{path}: no 'input' tensor")
    return state, tensors["input"], outputs


def _backbone_outputs(model, x: torch.Tensor, names: list[str], out_indices: list[int]) -> dict:
    by_type: dict[str, tuple] = {}
    got = {}
    for name in names:
        m = _LAYER_RE.match(name)
        if not m:
            raise ValueError(f"unknown backbone output name {name!r}")
        out_type, layer = m.group(1), m.group(3)
        if out_type not in by_type:
            model.out_type = out_type
            by_type[out_type] = model(x)
        outs = by_type[out_type]
        if layer is None:
            got[name] = outs[-1]
        else:
            li = int(layer)
            if li not in out_indices:
                raise ValueError(f"output {name!r}: layer {li} is not in out_indices {out_indices}")
            got[name] = outs[out_indices.index(li)]
    return got


def run_model_case(case: dict, root: Path, manifest: dict) -> CaseResult:
    """Run one ``kind: model`` golden case; see the module docstring."""
    name = case["name"]
    cfg = _substitute_arch(case["official_config"], manifest.get("arch_settings", {}))
    state, x, expected = split_case_file(Path(root) / case["file"])
    model = build_from_cfg_checked(MODELS, cfg)
    model.load_state_dict(state, strict=True)
    model.eval().float()
    with torch.inference_mode():
        if "backbone" in cfg:  # task model
            outs = model(x.float())
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            got = {}
            for key in expected:
                m = _OUT_RE.match(key)
                if not m or int(m.group(1)) >= len(outs):
                    raise ValueError(f"expected output {key!r} not produced (model gave {len(outs)})")
                got[key] = outs[int(m.group(1))]
        else:
            out_indices = cfg.get("out_indices", [-1])
            out_indices = [out_indices] if isinstance(out_indices, int) else list(out_indices)
            num_layers = model.num_layers
            out_indices = [i % num_layers for i in out_indices]
            got = _backbone_outputs(model, x.float(), list(expected), out_indices)
    tol = float(case["tolerance"]["abs"])
    errors = {}
    for key, ref in expected.items():
        ours = got[key]
        if tuple(ours.shape) != tuple(ref.shape):
            raise ValueError(f"output {key!r}: shape {tuple(ours.shape)} != golden {tuple(ref.shape)}")
        errors[key] = float((ours.float() - ref.float()).abs().max())
    worst = max(errors.values()) if errors else float("nan")
    return CaseResult(name=name, kind="model", passed=bool(errors) and worst <= tol, max_abs_err=worst,
                      tolerance=tol, errors=errors)
