"""Resolve a ``--device`` name to one this torch build can use, or fail with a clear message.

``"auto"`` picks CUDA when it is available and the CPU otherwise. Asking for a CUDA (or MPS) device
that this machine or torch build does not have raises :class:`DeviceUnavailableError` naming what was
asked for and what is available, instead of a traceback from deep inside torch.

Example:
    >>> from sapiens2.device import resolve_device
    >>> resolve_device("cpu")
    'cpu'
    >>> resolve_device("auto") in ("cpu", "cuda")
    True
    >>> resolve_device("tpu")
    Traceback (most recent call last):
    ...
    sapiens2.device.DeviceUnavailableError: unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sapiens2.errors import BenchError

if TYPE_CHECKING:
    import torch

_KNOWN = "auto, cpu, cuda, cuda:N or mps"


class DeviceUnavailableError(BenchError, ValueError):
    """A device name that is malformed or names hardware this torch build cannot use."""


def _cuda_state() -> str:
    import torch  # see resolve_device

    if torch.version.cuda is None:
        return f"this torch build ({torch.__version__}) has no CUDA support"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no usable CUDA device"


def resolve_device(name: str | torch.device | None) -> str:
    """The device to use for ``name``.

    Args:
        name: ``"auto"`` (or ``None``/empty): ``"cuda"`` when CUDA is available, else ``"cpu"``;
            otherwise any torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``).

    Returns:
        The device string, unchanged except for ``auto`` (``"cuda"`` stays ``"cuda"``, so a
        torchrun worker still picks its ``LOCAL_RANK`` device).

    Raises:
        DeviceUnavailableError: the name is not a device, or names a CUDA/MPS device that is not
            available (no CUDA in this torch build, no GPU, or an index past the device count).
    """
    # torch is imported here, not at the top: the command line's entry point imports this module for
    # every command, and its overview (``sapiens2-bench --help``) should not wait for torch.
    import torch

    text = "auto" if name is None or str(name).strip() == "" else str(name).strip()
    if text.lower() == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError) as e:
        raise DeviceUnavailableError(f"unknown device {text!r}; use {_KNOWN}") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"--device {text}: {_cuda_state()}; use --device cpu (or auto, which falls back to the CPU)"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DeviceUnavailableError(
                f"--device {text}: only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})"
            )
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceUnavailableError(f"--device {text}: MPS is not available in this torch build/machine")
    elif dev.type != "cpu":
        raise DeviceUnavailableError(f"unsupported device {text!r}; use {_KNOWN}")
    return text
