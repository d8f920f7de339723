"""User backbones from outside the package: ``--include PATH`` and ``package.module:ClassName`` names.

``import_paths`` imports ``.py`` files and folders before any backbone name is resolved (like
lm-evaluation-harness's ``--include_path``), so classes they register in ``PROBE_BACKBONES`` are
known by name; ``backbone_class`` resolves ``"pkg.module:ClassName"`` to a
:class:`~benchmarks.probe.backbones.base.ProbeBackbone` subclass, with a clear error when the
module or class does not exist or is not a probe backbone.

Example:
    >>> from benchmarks.probe.backbones.plugins import backbone_class
    >>> backbone_class("benchmarks.probe.backbones.pixels:PixelPatches").__name__
    'PixelPatches'
    >>> backbone_class("benchmarks.probe.backbones.pixels:Nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sapiens2.errors.UnknownNameError: unknown probe backbone class in ...pixels 'Nope'; known: PixelPatches
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

from benchmarks.probe.backbones.base import ProbeBackbone
from sapiens2.errors import BenchError, UnknownNameError


class BackboneSpecError(BenchError, ValueError):
    """A backbone name or plug-in that cannot be resolved (the message says why and what to do)."""


def is_class_path(name: object) -> bool:
    """Whether ``name`` has the ``package.module:ClassName`` form."""
    if not isinstance(name, str) or name.count(":") != 1:
        return False
    mod, cls = name.split(":")
    return bool(mod.strip()) and cls.strip().isidentifier()


def backbone_class(name: str) -> type[ProbeBackbone]:
    """Import ``package.module:ClassName`` and check that it is a probe backbone class.

    Raises:
        BackboneSpecError: the module cannot be imported, or the object is not a ProbeBackbone subclass.
        UnknownNameError: the module has no such attribute (lists its probe backbone classes).
    """
    mod_name, cls_name = (s.strip() for s in name.split(":"))
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name is not None and mod_name != e.name and not mod_name.startswith(e.name + "."):
            raise _plugin_error(f"--backbone {name}", mod_name, e) from e
        raise BackboneSpecError(
            f"--backbone {name}: cannot import module {mod_name!r} ({e}); put it on PYTHONPATH or pass "
            "--include PATH (a .py file or the folder holding it)"
        ) from e
    except (Exception, SystemExit) as e:  # the plug-in's own code failed: say so, and where
        raise _plugin_error(f"--backbone {name}", mod_name, e) from e
    if not hasattr(module, cls_name):
        known = sorted(
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and issubclass(v, ProbeBackbone) and v is not ProbeBackbone
        )
        raise UnknownNameError(f"probe backbone class in {mod_name}", cls_name, known or ["(none)"])
    obj = getattr(module, cls_name)
    if not (inspect.isclass(obj) and issubclass(obj, ProbeBackbone)):
        raise BackboneSpecError(
            f"--backbone {name}: {mod_name}.{cls_name} is {_what(obj)}, not a probe backbone (a subclass "
            "of benchmarks.probe.backbones.ProbeBackbone; see docs/probing.md, 'Adding a backbone')"
        )
    return obj


def _plugin_error(what: str, module: str, e: BaseException) -> BackboneSpecError:
    """The error of a plug-in module that failed while being imported (its code, not sapiens2-bench's)."""
    if isinstance(e, SystemExit):
        why = f"it called sys.exit({e.code!r}) while being imported"
    else:
        why = f"{type(e).__name__}: {e}"
    return BackboneSpecError(f"{what}: the plug-in module {module!r} failed to import: {why}. This is an "
                             "error in the plug-in's code, not in sapiens2-bench (--debug shows the "
                             "traceback)")


def _what(obj) -> str:
    return f"the class {obj.__name__}" if inspect.isclass(obj) else f"a {type(obj).__name__}"


def import_paths(paths) -> list[str]:
    """Import every user path before backbone names are resolved.

    A ``.py`` file is imported as the module named by its stem (its folder goes on ``sys.path`` so
    its own imports resolve); a folder goes on ``sys.path`` and each ``.py`` file and package
    (sub-folder with ``__init__.py``) directly inside it is imported. Modules already imported are
    not imported again.

    Args:
        paths: files or folders (str or PathLike).

    Returns:
        The module names imported.

    Raises:
        FileNotFoundError: a path does not exist.
        BackboneSpecError: a path is not a ``.py`` file or folder, or importing it failed (names the
            file and the error).
    """
    names: list[str] = []
    for raw in paths or ():
        path = Path(raw).expanduser().resolve()
        if not path.exists():
            raise FileNotFoundError(f"--include {raw}: no such file or folder")
        if path.is_file():
            if path.suffix != ".py":
                raise BackboneSpecError(f"--include {raw}: expected a .py file or a folder")
            names.append(_import_file(path))
        else:
            _on_sys_path(path)
            for child in sorted(path.iterdir()):
                if child.is_file() and child.suffix == ".py" and child.stem.isidentifier():
                    names.append(_import_file(child))
                elif child.is_dir() and (child / "__init__.py").is_file() and child.name.isidentifier():
                    names.append(_import_module(child.name, child / "__init__.py"))
    return names


def _on_sys_path(folder: Path) -> None:
    if os.fspath(folder) not in sys.path:
        sys.path.insert(0, os.fspath(folder))


def _import_file(path: Path) -> str:
    _on_sys_path(path.parent)
    return _import_module(path.stem, path)


def _import_module(name: str, path: Path) -> str:
    known = sys.modules.get(name)
    if known is not None and Path(getattr(known, "__file__", "") or "").resolve() == path.resolve():
        return name
    if known is not None:
        raise BackboneSpecError(
            f"--include {path}: the module name {name!r} is already taken by "
            f"{getattr(known, '__file__', known)}; rename the file"
        )
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit) as e:  # any error in user code: report which file failed and why
        raise _plugin_error(f"--include {path}", name, e) from e
    if Path(getattr(module, "__file__", "") or "").resolve() != path.resolve():
        raise BackboneSpecError(
            f"--include {path}: importing {name!r} found {getattr(module, '__file__', module)} first on "
            "sys.path; rename the file"
        )
    return name
