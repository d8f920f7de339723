"""Reading and loading checkpoints of the official layout (``.safetensors`` preferred, ``.pth``/``.pt``).

``load_state_dict_file`` reads a file into a flat ``{key: tensor}`` dict (``.pth`` only through
``torch.load(weights_only=True)``); ``load_checkpoint`` loads it into a model, strictly by default,
and reports every missing, unexpected and wrong-shaped key in one :class:`CheckpointMismatchError`.

Weights holding NaN or Inf (a diverged training run, a broken conversion) are refused when read:
such a model silently predicts all background or all-NaN maps, so :class:`NonFiniteWeightsError`
names the file and the first bad tensors instead (:func:`check_finite`).

Prefixes are detected: an official backbone-only file (keys ``cls_token``, ``blocks.N...``) loads into
an estimator's ``backbone``; a task file (``backbone.*``, ``decode_head.*``) loads into a bare
backbone by taking its ``backbone.*`` part.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from sapiens2.errors import BenchError

_MAX_LISTED = 10
_SAFETENSORS = (".safetensors",)
_TORCH = (".pth", ".pt", ".bin", ".ckpt")


class CheckpointMismatchError(RuntimeError):
    """A state dict does not fit a model: lists missing, unexpected and wrong-shaped keys."""

    def __init__(self, message: str, missing: list[str], unexpected: list[str],
                 mismatched: list[tuple[str, tuple, tuple]]) -> None:
        super().__init__(message)
        self.missing = missing
        self.unexpected = unexpected
        self.mismatched = mismatched


class NonFiniteWeightsError(BenchError, ValueError):
    """Floating-point weights that hold NaN or Inf values; names the source and the first bad keys.

    Attributes:
        source: the checkpoint file (or ``"state dict"``).
        keys: every key whose tensor has a non-finite value, in state-dict order.
    """

    def __init__(self, source: str, bad: list[tuple[str, int, int]]):
        self.source, self.keys = source, [k for k, _, _ in bad]
        listed = [f"{k} ({n} of {total} values)" for k, n, total in bad]
        super().__init__(
            f"{source}: {len(bad)} weight tensor(s) hold NaN or Inf values: {_listing(listed, 5)}; "
            "the checkpoint is broken (a diverged run or a failed conversion?) and is not loaded")


def nonfinite_tensors(state: Mapping[str, torch.Tensor]) -> list[tuple[str, int, int]]:
    """Floating-point (or complex) tensors of ``state`` that hold NaN or Inf.

    Args:
        state: a state dict; integer, bool and meta tensors are skipped.

    Returns:
        ``(key, number of non-finite values, number of values)`` per bad tensor, in ``state`` order.

    Example:
        >>> import torch
        >>> nonfinite_tensors({"a": torch.ones(3), "b": torch.tensor([1.0, float("nan"), float("inf")])})
        [('b', 2, 3)]
    """
    bad = []
    for k, v in state.items():
        if not isinstance(v, torch.Tensor) or v.is_meta or not (v.is_floating_point() or v.is_complex()):
            continue
        # A finite sum proves every value finite (NaN and Inf propagate through a sum) and is ~50x
        # faster than isfinite on the CPU; only a non-finite sum (or an overflow) needs the count.
        if bool(torch.isfinite(v.sum())):
            continue
        n_bad = int(v.numel() - torch.isfinite(v).sum().item())
        if n_bad:
            bad.append((k, n_bad, v.numel()))
    return bad


def check_finite(state: Mapping[str, torch.Tensor], source: str = "state dict") -> None:
    """Raise :class:`NonFiniteWeightsError` when any floating-point tensor holds NaN or Inf.

    Args:
        state: a state dict.
        source: what to name in the message (the checkpoint file).
    """
    bad = nonfinite_tensors(state)
    if bad:
        raise NonFiniteWeightsError(source, bad)


@dataclass
class LoadReport:
    """What :func:`load_checkpoint` did.

    Attributes:
        target: which part of the model was loaded (``'model'`` or ``'backbone'``).
        loaded: number of tensors copied.
        missing: model keys absent from the checkpoint.
        unexpected: checkpoint keys the model lacks.
        mismatched: (key, checkpoint shape, model shape) of wrong-shaped keys.
        ignored: checkpoint keys dropped on purpose (a task file's head when loading a backbone).
    """

    target: str
    loaded: int = 0
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def load_state_dict_file(path: str | Path, allow_nonfinite: bool = False) -> dict[str, torch.Tensor]:
    """Read a checkpoint file into a flat ``{key: tensor}`` dict on the CPU.

    Args:
        path: ``.safetensors`` (read with safetensors) or ``.pth``/``.pt``/``.bin``/``.ckpt`` (read
            with ``torch.load(weights_only=True)``; a top-level ``state_dict`` entry is unwrapped).
        allow_nonfinite: skip the NaN/Inf check (for inspecting a broken file).

    Returns:
        The state dict.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: unknown suffix, a corrupt or truncated file, a pickle holding objects other
            than tensors, or entries that are not tensors.
        NonFiniteWeightsError: a floating-point tensor holds NaN or Inf (names the file and keys).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file not found: {path}")
    suffix = path.suffix.lower()
    if suffix in _SAFETENSORS:
        from safetensors.torch import load_file

        try:
            state = load_file(str(path), device="cpu")
        except Exception as e:  # safetensors raises its own error types for corrupt headers/data
            raise ValueError(f"{path}: not a readable .safetensors file (corrupt or truncated?): {e}") from e
    elif suffix in _TORCH:
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            raise pickle_refused(path, e) from e
        except Exception as e:
            raise ValueError(f"{path}: cannot be read with torch.load(weights_only=True) (corrupt, "
                             f"truncated, or holds objects other than tensors): {e}") from e
    else:
        raise ValueError(f"{path}: unknown checkpoint suffix {suffix!r}; expected one of "
                         f"{', '.join(_SAFETENSORS + _TORCH)}")
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise ValueError(f"{path}: expected a dict of tensors, got {type(state).__name__}")
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: entries that are not tensors: {_listing(bad)}")
    if not allow_nonfinite:
        check_finite(state, str(path))
    return dict(state)


def pickle_refused(path: str | Path, e: Exception) -> ValueError:
    """The error for a pickle that ``torch.load(weights_only=True)`` refuses (objects other than tensors).

    Args:
        path: the file or folder that was read.
        e: the ``pickle.UnpicklingError`` torch raised; its one informative line is kept.
    """
    reason = type(e).__name__
    for line in str(e).splitlines():
        if "WeightsUnpickler error:" in line:
            reason = line.split("WeightsUnpickler error:", 1)[1].strip().split(". ")[0]
            break
    return ValueError(f"{path}: refused: the pickle holds Python objects other than tensors ({reason}); "
                      "loading them could run code, so only torch.load(weights_only=True) is used. "
                      "Re-save the weights as .safetensors")


def _listing(keys: list, limit: int = _MAX_LISTED) -> str:
    shown = ", ".join(str(k) for k in keys[:limit])
    more = len(keys) - limit
    return shown + (f", ... and {more} more" if more > 0 else "")


def _strip(state: Mapping[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def _pick_target(model: nn.Module, state: Mapping[str, torch.Tensor]) -> tuple[nn.Module, dict, str, list]:
    """Decide which module the state dict is for and with which keys; see the module docstring."""
    model_keys = set(model.state_dict())
    keys = set(state)
    backbone = getattr(model, "backbone", None)
    has_prefix = any(k.startswith(("backbone.", "decode_head.")) for k in keys)
    if isinstance(backbone, nn.Module) and not has_prefix and not (keys & model_keys):
        return backbone, dict(state), "backbone", []
    if backbone is None and has_prefix and not (keys & model_keys):
        ignored = sorted(k for k in keys if not k.startswith("backbone."))
        return model, _strip(state, "backbone."), "model", ignored
    return model, dict(state), "model", []


def load_checkpoint(model: nn.Module, path_or_state_dict: str | Path | Mapping[str, torch.Tensor],
                    strict: bool = True, assign: bool = False) -> LoadReport:
    """Load a checkpoint into ``model``.

    Args:
        model: an estimator or a backbone.
        path_or_state_dict: a checkpoint file (see :func:`load_state_dict_file`) or a state dict.
        strict: raise when any key is missing, unexpected or wrong-shaped. When False, the matching
            tensors are loaded and the rest is reported.
        assign: passed to ``nn.Module.load_state_dict`` (use True for a model built on the meta device).

    Returns:
        A :class:`LoadReport`.

    Raises:
        CheckpointMismatchError: ``strict`` and the checkpoint does not fit; the message lists the
            missing, unexpected and wrong-shaped keys (the first ten of each, with counts).
        NonFiniteWeightsError: a floating-point tensor holds NaN or Inf.
    """
    source = str(path_or_state_dict) if isinstance(path_or_state_dict, (str, Path)) else "state dict"
    if isinstance(path_or_state_dict, (str, Path)):
        state = load_state_dict_file(path_or_state_dict)
    elif isinstance(path_or_state_dict, Mapping):
        state = dict(path_or_state_dict)
        check_finite(state, source)
    else:
        kind = type(path_or_state_dict).__name__
        raise TypeError(f"expected a checkpoint path or a state dict, got {kind}")
    target, state, target_name, ignored = _pick_target(model, state)
    own = target.state_dict()
    missing = sorted(k for k in own if k not in state)
    unexpected = sorted(k for k in state if k not in own)
    mismatched = sorted((k, tuple(v.shape), tuple(own[k].shape)) for k, v in state.items()
                        if k in own and tuple(v.shape) != tuple(own[k].shape))
    report = LoadReport(target=target_name, missing=missing, unexpected=unexpected, mismatched=mismatched,
                        ignored=ignored)
    if strict and (missing or unexpected or mismatched):
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s): {_listing(missing)}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s): {_listing(unexpected)}")
        if mismatched:
            shapes = [f"{k} (checkpoint {list(a)} vs model {list(b)})" for k, a, b in mismatched]
            parts.append(f"{len(mismatched)} wrong-shaped key(s): {_listing(shapes)}")
        where = f" (loading into its {target_name})" if target_name != "model" else ""
        raise CheckpointMismatchError(
            f"checkpoint {source} does not match {type(model).__name__}{where}: " + "; ".join(parts),
            missing, unexpected, mismatched)
    bad = {k for k, _, _ in mismatched}
    usable = {k: v for k, v in state.items() if k in own and k not in bad}
    target.load_state_dict(usable, strict=False, assign=assign)
    report.loaded = len(usable)
    return report
