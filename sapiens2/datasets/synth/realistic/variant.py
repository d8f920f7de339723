"""Choose the Mitsuba variant once per process: the LLVM JIT where it works, else the scalar CPU one.

``llvm_ad_rgb`` needs a libLLVM that Dr.Jit accepts; with some system LLVMs (Debian's LLVM 15) it
aborts the whole process instead of raising, so every candidate library is tried by rendering one
pixel in a child process first. The choice is kept in the environment
(``SAPIENS2_MITSUBA_VARIANT`` and ``DRJIT_LIBLLVM_PATH``), so worker processes inherit it and do
not repeat the check. ``SAPIENS2_MITSUBA_VARIANT`` set by the user forces a variant (checked too).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import subprocess
import sys

from sapiens2.errors import BenchError

VARIANT_ENV = "SAPIENS2_MITSUBA_VARIANT"
LLVM_ENV = "DRJIT_LIBLLVM_PATH"
FAST_VARIANT = "llvm_ad_rgb"
FALLBACK_VARIANT = "scalar_rgb"
INSTALL_HINT = "pip install -e '.[realistic]' (mitsuba==3.9.1, drjit==1.5.0, anny==0.6.2)"
LLVM_HINT = "apt-get install libllvm19 (optional: about 1.8x faster rendering)"
CHECK_TIMEOUT_S = 180

# One pixel of a diffuse quad under a constant light: small, but it JIT-compiles a real kernel.
_ONE_PIXEL = """
import mitsuba as mi, sys
mi.set_variant(sys.argv[1])
scene = mi.load_dict({"type": "scene", "light": {"type": "constant"},
    "quad": {"type": "rectangle"}, "integrator": {"type": "path"},
    "sensor": {"type": "perspective", "to_world": mi.ScalarTransform4f().look_at(
        origin=[0, 0, 3], target=[0, 0, 0], up=[0, 1, 0]),
        "film": {"type": "hdrfilm", "width": 1, "height": 1}}})
value = float(mi.render(scene, spp=1).numpy().ravel()[0])
assert value == value, "NaN pixel"
print("ok")
"""


class RendererMissingError(BenchError, RuntimeError):
    """Mitsuba (the renderer of the realistic generator) is not installed or cannot start."""


def require_mitsuba() -> None:
    """Raise :class:`RendererMissingError` naming the package when mitsuba or drjit is not installed."""
    for name in ("mitsuba", "drjit"):
        if importlib.util.find_spec(name) is None:
            raise RendererMissingError(
                f"the realistic synthetic generator (--generator realistic) needs the '{name}' package, "
                f"which is not installed: {INSTALL_HINT}"
            )


def llvm_candidates() -> list[str]:
    """libLLVM shared libraries to try, newest version first (``$DRJIT_LIBLLVM_PATH`` alone if set)."""
    if os.environ.get(LLVM_ENV):
        return [os.environ[LLVM_ENV]]
    found = []
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                   "/usr/local/lib", "/opt/homebrew/opt/llvm/lib"):
        found += glob.glob(os.path.join(folder, "libLLVM-[0-9]*.so")) + glob.glob(
            os.path.join(folder, "libLLVM.dylib"))

    def version(path: str) -> int:
        digits = os.path.basename(path).split("-")[-1].split(".")[0]
        return int(digits) if digits.isdigit() else 0

    return sorted(set(found), key=version, reverse=True)


def works(variant: str, libllvm: str | None = None) -> tuple[bool, str]:
    """Render one pixel with ``variant`` in a child process; (it worked, why not)."""
    env = dict(os.environ)
    if libllvm:
        env[LLVM_ENV] = libllvm
    try:
        done = subprocess.run([sys.executable, "-c", _ONE_PIXEL, variant], env=env, capture_output=True,
                              text=True, timeout=CHECK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"the one-pixel check timed out after {CHECK_TIMEOUT_S} s"
    if done.returncode == 0 and done.stdout.strip().endswith("ok"):
        return True, ""
    tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return False, tail[:200]


def choose_variant(quiet: bool = False) -> str:
    """The Mitsuba variant this process renders with (decided once, kept in the environment).

    Args:
        quiet: do not print the one-line fall-back message.

    Returns:
        ``llvm_ad_rgb`` when a libLLVM passes the one-pixel check, else ``scalar_rgb``.

    Raises:
        RendererMissingError: mitsuba/drjit missing, or a forced variant (or even ``scalar_rgb``)
            fails its check.
    """
    require_mitsuba()
    forced = os.environ.get(VARIANT_ENV)
    if forced:
        if forced == FAST_VARIANT and not os.environ.get(LLVM_ENV) and not _checked(forced):
            # forced LLVM with no library named: find one as for the automatic choice
            return _pick_llvm(quiet, forced=True)
        if not _checked(forced):
            ok, why = works(forced, os.environ.get(LLVM_ENV))
            if not ok:
                raise RendererMissingError(f"{VARIANT_ENV}={forced}: Mitsuba cannot render with it ({why})")
            _mark_checked(forced)
        return forced
    return _pick_llvm(quiet, forced=False)


def _checked(variant: str) -> bool:
    return os.environ.get(VARIANT_ENV + "_CHECKED") == variant


def _mark_checked(variant: str) -> None:
    os.environ[VARIANT_ENV] = variant
    os.environ[VARIANT_ENV + "_CHECKED"] = variant


def _pick_llvm(quiet: bool, forced: bool) -> str:
    reasons = []
    for lib in llvm_candidates():
        ok, why = works(FAST_VARIANT, lib)
        if ok:
            os.environ[LLVM_ENV] = lib
            _mark_checked(FAST_VARIANT)
            return FAST_VARIANT
        reasons.append(f"{os.path.basename(lib)}: {why}")
    if forced:
        raise RendererMissingError(f"{VARIANT_ENV}={FAST_VARIANT}: no libLLVM works "
                                   f"({'; '.join(reasons) or 'none found'}); {LLVM_HINT}")
    ok, why = works(FALLBACK_VARIANT)
    if not ok:
        raise RendererMissingError(f"Mitsuba cannot render even with {FALLBACK_VARIANT} ({why}); "
                                   f"reinstall it: {INSTALL_HINT}")
    if not quiet:
        tried = "; ".join(reasons) if reasons else "no libLLVM found"
        print(f"sapiens2 realistic: rendering with Mitsuba's {FALLBACK_VARIANT} (slower) since "
              f"{FAST_VARIANT} is unusable ({tried}); {LLVM_HINT}", file=sys.stderr)
    _mark_checked(FALLBACK_VARIANT)
    return FALLBACK_VARIANT


def load_mitsuba(threads: int | None = None):
    """Import mitsuba with the chosen variant set; ``threads`` limits its render threads.

    Returns:
        The ``mitsuba`` module.
    """
    variant = choose_variant()
    import drjit as dr
    import mitsuba as mi

    if mi.variant() != variant:
        mi.set_variant(variant)
    if threads is not None:
        dr.set_thread_count(max(1, int(threads)))
    return mi


if __name__ == "__main__":  # python -m sapiens2.datasets.synth.realistic.variant
    print(choose_variant())
