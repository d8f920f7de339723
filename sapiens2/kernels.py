"""What picks the floating-point kernels of a run: the key under which two runs may agree bit for bit.

The CPU model and the torch version alone do not decide the summation order of a float sum: NumPy's
BLAS (its library, version and the per-CPU kernel it dispatched to), torch's build (its MKL and
oneDNN versions, build flags) and the SIMD level torch chose at run time all do. :func:`kernel_key`
records them; :func:`kernel_mismatch` says which one differs from a recorded key (or that the
record has none), so a check compares bit for bit only when every one of them is the same, and
otherwise to a documented tolerance.

Example:
    >>> key = kernel_key()
    >>> kernel_mismatch(key, key) is None
    True
    >>> kernel_mismatch({"cpu_model": "AMD EPYC", "torch": "2.13.0+cpu"}, key)
    'the recorded key lacks torch_cpu_capability, torch_config_sha256, numpy_version, numpy_blas'
"""

from __future__ import annotations

import hashlib
import platform
import subprocess

__all__ = ["KERNEL_FIELDS", "cpu_model", "kernel_key", "kernel_mismatch"]

KERNEL_FIELDS = ("cpu_model", "torch", "torch_cpu_capability", "torch_config_sha256", "numpy_version",
                 "numpy_blas")


def cpu_model() -> str:
    """The CPU's model name (``lscpu``'s "Model name", else ``/proc/cpuinfo``, else the platform's)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
        if names:
            return names[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def _numpy_blas() -> str:
    """NumPy's BLAS: library and version from its build, and the kernel it dispatched to on this CPU."""
    import numpy as np

    name = "?"
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name = f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except (TypeError, KeyError, AttributeError):  # NumPy < 1.25 has no dict mode: the loaded library says
        pass
    try:
        from threadpoolctl import threadpool_info

        arch = sorted({str(i.get("architecture")) for i in threadpool_info()
                       if i.get("user_api") == "blas" and i.get("architecture")})
        if arch:
            name += f" ({', '.join(arch)})"
    except ImportError:
        pass
    return name


def kernel_key() -> dict:
    """This process's kernel key (:data:`KERNEL_FIELDS`)."""
    import numpy as np
    import torch

    config = torch.__config__.show()  # MKL / oneDNN versions, BLAS_INFO, build flags
    return {
        "cpu_model": cpu_model(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_config_sha256": hashlib.sha256(config.encode("utf-8")).hexdigest()[:16],
        "numpy_version": np.__version__,
        "numpy_blas": _numpy_blas(),
    }


def kernel_mismatch(recorded: dict | None, current: dict | None = None) -> str | None:
    """Why ``recorded`` is not this machine's kernel key (None: every field is the same).

    Args:
        recorded: a key :func:`kernel_key` made (possibly elsewhere); fields it lacks count as differing.
        current: the key to compare with (default: this process's).
    """
    current = kernel_key() if current is None else current
    recorded = recorded or {}
    missing = [f for f in KERNEL_FIELDS if f not in recorded]
    if missing:
        return f"the recorded key lacks {', '.join(missing)}"
    differ = [f"{f} {recorded[f]!r} there, {current.get(f)!r} here" for f in KERNEL_FIELDS
              if recorded[f] != current.get(f)]
    return "; ".join(differ) or None
