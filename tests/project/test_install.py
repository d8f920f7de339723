"""Packaging: ranges in pyproject.toml, exact pins in scripts/constraints.txt, and a bootstrapped
.venv that really holds the pinned versions of everything sapiens2-bench and its extras need."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python >= 3.11 (tomllib)")

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP_EXTRAS = ("test", "openmmlab", "hf", "coco", "realistic")  # what scripts/bootstrap.sh installs
NO_DEPS = ("mmpose",)  # installed with --no-deps by scripts/bootstrap.sh


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins() -> dict[str, Version]:
    pins = {}
    for n, line in enumerate((ROOT / "scripts" / "constraints.txt").read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line)
        assert m, f"scripts/constraints.txt line {n}: {line!r} is not an exact 'name==version' pin"
        pins[canonicalize_name(m[1])] = Version(m[2])
    return pins


def _declared() -> list[Requirement]:
    proj = _project()
    reqs = [Requirement(r) for r in proj["dependencies"]]
    return reqs + [Requirement(r) for extra in proj["optional-dependencies"].values() for r in extra]


def test_pyproject_declares_ranges_not_pins():
    for req in _declared():
        assert not any(s.operator in ("==", "===") for s in req.specifier), f"exact pin in pyproject: {req}"
    deps = {canonicalize_name(r.name): r.specifier for r in map(Requirement, _project()["dependencies"])}
    for v in ("2.4.0", "2.13.0", "2.13.0+cpu", "2.13.0+cu128"):
        assert deps["torch"].contains(v), f"torch {v} must be allowed (CPU or CUDA builds, >= 2.4)"
    for v in ("1.26.4", "2.0.0", "2.4.6"):
        assert deps["numpy"].contains(v), f"numpy {v} must be allowed (NumPy 1 and 2)"
    for v in ("2.3.3", "3.1.1"):
        assert deps["pandas"].contains(v), f"pandas {v} must be allowed (pandas 2 and 3)"


def test_constraints_pin_every_declared_package_inside_its_range():
    pins = _pins()
    for req in _declared():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not pinned in scripts/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"scripts/constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req}"
        )
    for name in NO_DEPS + ("torch", "numpy", "pip", "setuptools", "wheel"):
        assert canonicalize_name(name) in pins, f"{name} not pinned in scripts/constraints.txt"


def _needed() -> dict[str, str]:
    """Installed distributions that pyproject.toml's dependencies and the bootstrap extras need,
    transitively (read from pyproject.toml, then from each installed package's metadata): name ->
    who needs it."""
    proj = _project()
    roots = list(proj["dependencies"])
    roots += [r for extra in BOOTSTRAP_EXTRAS for r in proj["optional-dependencies"][extra]]
    needed, todo = {}, [(r, "pyproject.toml") for r in roots + list(NO_DEPS)]
    while todo:
        line, parent = todo.pop()
        req = Requirement(line)
        key = canonicalize_name(req.name)
        if key in needed:
            continue
        needed[key] = parent
        if key in map(canonicalize_name, NO_DEPS):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise AssertionError(f"{req.name} (needed by {parent}) not installed in {sys.prefix}") from None
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            envs = [{"extra": e} for e in req.extras] or [{"extra": ""}]
            if sub_req.marker is None or any(sub_req.marker.evaluate(env) for env in envs):
                todo.append((sub, key))
    return needed


@pytest.mark.bootstrap
def test_bootstrapped_venv_holds_the_pinned_versions():
    pins = _pins()
    needed = _needed()
    wrong = []
    for name, parent in sorted(needed.items()):
        have = Version(metadata.version(name))
        if name not in pins:
            wrong.append(f"{name} {have} (needed by {parent}) is not pinned in scripts/constraints.txt")
        elif Version(have.public) != pins[name]:
            wrong.append(f"{name}: installed {have}, pinned {pins[name]}")
    assert not wrong, "\n".join(wrong)
    print(f"{len(needed)} needed distributions, all at their pins")


@pytest.mark.bootstrap
def test_bootstrapped_venv_has_the_xtcocotools_reference():
    """The bootstrap environment is NumPy 1, where the prebuilt xtcocotools wheel must import, so
    the pose AP comparisons run there rather than skip."""
    from tests.conftest import xtcocotools_problem

    assert xtcocotools_problem() is None, xtcocotools_problem()


class _NumpyAbiMismatch:
    """A meta-path finder that fails like a NumPy-1 build of xtcocotools under NumPy 2."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "xtcocotools":
            raise ValueError("numpy.dtype size changed, may indicate binary incompatibility")
        return None


def test_xtcocotools_problem_reports_abi_mismatch_and_absence(monkeypatch):
    """The skip check of the xtcocotools-marked tests catches the ValueError of a NumPy-1 wheel (which
    ``pytest.importorskip`` would let through as an error) as well as a missing package."""
    from tests.conftest import xtcocotools_problem

    check = xtcocotools_problem.__wrapped__  # uncached
    for name in [m for m in sys.modules if m.split(".")[0] == "xtcocotools"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NumpyAbiMismatch(), *sys.meta_path])
    assert "(ValueError: numpy.dtype size changed, may indicate binary incompatibility)" in check()
    monkeypatch.setitem(sys.modules, "xtcocotools", None)
    assert re.search(r"\((ModuleNotFound|Import)Error: ", check()), check()


def _pip_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("pip_check", ROOT / "scripts" / "pip_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pip_check_allows_only_the_listed_no_deps_gaps(monkeypatch):
    """scripts/pip_check.py: an unlisted unmet requirement fails, and so does a listed gap that is met."""
    pc = _pip_check_module()
    gaps = pc.allowed_gaps()
    assert gaps and all(reason for reason in gaps.values())
    assert {pkg for pkg, _ in gaps} == {"mmpose", "mediapipe"}, "only the --no-deps installs may have gaps"
    out = "".join(f"{pkg} 1.0 requires {req}, which is not installed.\n" for pkg, req in gaps)
    monkeypatch.setattr(pc, "_installed", lambda name: True)
    assert pc.problems(out, gaps) == []
    extra = out + "mmengine 0.10.7 has requirement opencv-python>=3, but you have opencv-python 2.0.\n"
    assert pc.problems(extra, gaps) == ["unmet and not in no-deps-gaps.txt: mmengine needs opencv-python"]
    stale = "".join(out.splitlines(keepends=True)[1:])
    assert pc.problems(stale, gaps) == [
        "listed in no-deps-gaps.txt but no longer unmet: mmpose chumpy (remove the line)"]
    monkeypatch.setattr(pc, "_installed", lambda name: name != "mmpose")  # an uninstalled package's gaps
    assert pc.problems(stale, gaps) == []


def test_environment_passes_pip_check():
    """The environment the suite runs in (the bootstrapped .venv, a tox env, a user's own) has no unmet
    requirement but the listed gaps of the --no-deps installs (none where those are absent)."""
    import subprocess

    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "pip_check.py")], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    print(res.stdout)


def test_one_opencv_build_installed():
    """Two OpenCV builds write the same cv2/ files, so whichever was installed last wins in part."""
    builds = [d for d in ("opencv-python", "opencv-python-headless", "opencv-contrib-python",
                          "opencv-contrib-python-headless") if _installed(d)]
    assert len(builds) == 1, f"expected one OpenCV build in {sys.prefix}, found {builds or 'none'}"


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_one_opencv_build_and_no_unused_packages():
    """pyproject declares the OpenCV build mmengine and mmpose require (not a second, -headless one),
    and none of the packages nothing imports (six, ftfy) that earlier versions carried."""
    names = {canonicalize_name(r.name) for r in _declared()}
    assert "opencv-python" in names and "opencv-python-headless" not in names
    assert not names & {"six", "ftfy", "cython"}
    core = {canonicalize_name(Requirement(d).name) for d in _project()["dependencies"]}
    assert {"transformers", "huggingface-hub"} <= core, "the default main job's dinov2_small needs them"
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
