"""Where and in which precision a model runs, and a stage-by-stage progress bar for long runs.

``with_precision`` moves a model to a device and, for ``bf16``, runs its ``forward`` under
``torch.autocast`` (matmuls and convolutions in bfloat16, reductions and norms as autocast keeps
them) and hands every output tensor back in float32, so post-processing (resizing, argmax, heatmap
decoding) is the same code in both precisions. :class:`StageBar` is a tqdm bar with one step per
stage whose description names the stage in progress.

Example:
    >>> import torch
    >>> from torch import nn
    >>> lin = with_precision(nn.Linear(4, 2), "cpu", "bf16")
    >>> lin(torch.ones(1, 4)).dtype
    torch.float32
    >>> resolve_dtype("bfloat16"), resolve_dtype(None)
    ('bf16', 'fp32')
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings

import torch
from torch import nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16"}


def resolve_dtype(name: str | None) -> str:
    """``"fp32"`` or ``"bf16"`` for a dtype name (``None`` is fp32).

    Raises:
        ValueError: any other name, listing the accepted ones.
    """
    text = "fp32" if name is None else _ALIASES.get(str(name).lower(), str(name).lower())
    if text not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; use {' or '.join(DTYPES)}")
    return text


def _to_float(out):
    if isinstance(out, torch.Tensor):
        return out.float() if out.is_floating_point() else out
    if isinstance(out, (tuple, list)):
        return type(out)(_to_float(o) for o in out)
    if isinstance(out, dict):
        return {k: _to_float(v) for k, v in out.items()}
    return out


def with_precision(model: nn.Module, device: str = "cpu", dtype: str = "fp32") -> nn.Module:
    """Move ``model`` to ``device``; for ``bf16`` wrap its ``forward`` in autocast (outputs float32).

    The weights stay float32 (autocast casts per operation), so the same model object can be
    compared with itself in both precisions.

    Args:
        model: the module (its class-level ``forward`` is kept; an instance attribute wraps it).
        device: torch device string.
        dtype: ``fp32`` or ``bf16`` (see :func:`resolve_dtype`).

    Returns:
        The same module.
    """
    dtype = resolve_dtype(dtype)
    model.to(device)
    base = type(model).forward.__get__(model)
    if dtype == "fp32":
        model.__dict__.pop("forward", None)
        return model
    device_type = torch.device(device).type

    def forward(*args, **kwargs):
        with torch.autocast(device_type, dtype=DTYPES[dtype]), warnings.catch_warnings():
            # RMSNorm gets bf16 input and float32 weights under autocast: torch warns that it cannot
            # use its fused kernel; the unfused one computes the same.
            warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")
            out = base(*args, **kwargs)
        return _to_float(out)

    model.forward = forward
    return model


def device_line(device: str, dtype: str) -> str:
    """One line naming the device (CPU threads or GPU name) and the precision.

    Example:
        >>> device_line("cpu", "fp32").startswith("device cpu (")
        True
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        where = torch.cuda.get_device_name(index)
    else:
        where = f"{torch.get_num_threads()} threads"
    precision = "bfloat16 autocast, float32 weights" if dtype == "bf16" else "float32"
    return f"device {device} ({where}), dtype {dtype} ({precision})"


class StageBar:
    """A tqdm bar on stderr with one step per stage; the description names the running stage.

    Args:
        total: number of stages.
        enabled: False gives a silent bar (stages are still timed).

    ``seconds`` maps each finished stage name to its wall time.
    """

    def __init__(self, total: int, enabled: bool = True) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="stage", file=sys.stderr, disable=not enabled, dynamic_ncols=True,
                        bar_format="{desc} |{bar}| {n_fmt}/{total_fmt} stages [{elapsed}]")
        self.seconds: dict[str, float] = {}
        self._running: tuple[str, float] | None = None

    def begin(self, name: str) -> None:
        """Show ``name`` as the running stage."""
        self.bar.set_description_str(name, refresh=True)
        self._running = (name, time.perf_counter())

    def end(self) -> None:
        """Count the running stage done and keep its time."""
        if self._running is not None:
            name, t0 = self._running
            self.seconds[name] = time.perf_counter() - t0
            self._running = None
        self.bar.update(1)

    @contextlib.contextmanager
    def stage(self, name: str):
        """Show ``name`` while the block runs, then count one stage done."""
        self.begin(name)
        yield
        self.end()

    def write(self, line: str) -> None:
        """Print a line without breaking the bar (stdout)."""
        self.bar.write(line, file=sys.stdout)

    def close(self) -> None:
        self.bar.set_description_str("done", refresh=False)
        self.bar.close()
