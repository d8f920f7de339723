"""Plug-ins: code from outside the package that registers tasks, readers, evaluators, probe tasks or
backbones, loaded once before anything reads a registry.

Two ways in, both read by every ``sapiens2-bench`` command before its parser is built (so a choice
list or default computed from a registry, such as ``probe --tasks``, already sees the plug-in):

- ``--include PATH_OR_MODULE`` (repeatable, before or after the subcommand): a ``.py`` file (imported
  as the module named by its stem, its folder put on ``sys.path``), a folder (every ``.py`` file and
  package directly inside it), or an importable module name (``mypackage.tasks``);
- the entry-point group :data:`ENTRY_POINT_GROUP` of installed distributions: each entry point names
  a module (or an object in it); loading it imports the module, which registers what it defines.
  In a plug-in's ``pyproject.toml``::

      [project.entry-points."sapiens2_bench.plugins"]
      depth = "my_depth_task"

A module is imported once however often it is named. A plug-in whose own code fails while being
imported is a :class:`PluginError` naming the plug-in and the error (never blamed on this package).

Example:
    >>> from sapiens2.plugins import include
    >>> include(["sapiens2.vocab"])
    ['sapiens2.vocab']
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from sapiens2.errors import BenchError

ENTRY_POINT_GROUP = "sapiens2_bench.plugins"


class PluginError(BenchError, ValueError):
    """A plug-in that cannot be loaded (the message names it and says why)."""


def plugin_error(what: str, module: str, e: BaseException) -> PluginError:
    """The error of a plug-in module that failed while being imported (its code, not sapiens2-bench's)."""
    if isinstance(e, SystemExit):
        why = f"it called sys.exit({e.code!r}) while being imported"
    else:
        why = f"{type(e).__name__}: {e}"
    return PluginError(f"{what}: the plug-in module {module!r} failed to import: {why}. This is an "
                       "error in the plug-in's code, not in sapiens2-bench (--debug shows the traceback)")


def include(items: Iterable[str | os.PathLike]) -> list[str]:
    """Import every ``--include`` item: a ``.py`` file, a folder of them, or a module name.

    Args:
        items: files, folders or dotted module names.

    Returns:
        The module names imported (or found imported already), in order.

    Raises:
        FileNotFoundError: a path-like item (with a ``/`` or a ``.py`` suffix) that does not exist.
        PluginError: a file that is not ``.py``, a module name taken by another file, a module that
            cannot be found, or one whose code failed while being imported.
    """
    names: list[str] = []
    for raw in items or ():
        text = os.fspath(raw)
        path = Path(text).expanduser()
        if not path.exists() and _module_name(text):
            names.append(_import_named(text))
            continue
        path = path.resolve()
        if not path.exists():
            raise FileNotFoundError(f"--include {raw}: no such file or folder (nor a module name)")
        if path.is_file():
            if path.suffix != ".py":
                raise PluginError(f"--include {raw}: expected a .py file, a folder or a module name")
            names.append(_import_file(path))
            continue
        _on_sys_path(path)
        for child in sorted(path.iterdir()):
            if child.is_file() and child.suffix == ".py" and child.stem.isidentifier():
                names.append(_import_file(child))
            elif child.is_dir() and (child / "__init__.py").is_file() and child.name.isidentifier():
                names.append(_import_module(child.name, child / "__init__.py"))
    return names


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Load every entry point of ``group`` (installed plug-ins); returns their names.

    Raises:
        PluginError: an entry point whose module failed to import (named with its distribution).
    """
    loaded = []
    for ep in metadata.entry_points(group=group):
        try:
            ep.load()
        except (Exception, SystemExit) as e:  # the plug-in's code failed: say which one and why
            dist = getattr(ep.dist, "name", None) or "?"
            raise plugin_error(f"entry point {ep.name!r} ({group}, distribution {dist})", ep.value, e) from e
        loaded.append(ep.name)
    return loaded


def include_args(argv: Iterable[str]) -> list[str]:
    """The values of every ``--include X`` / ``--include=X`` in a command line (before a ``--``).

    Example:
        >>> include_args(["--include", "a.py", "probe", "--include=b", "--", "--include", "c"])
        ['a.py', 'b']
    """
    argv, out = list(argv), []
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--include" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith("--include="):
            out.append(arg.split("=", 1)[1])
    return out


def _module_name(text: str) -> bool:
    return not text.endswith(".py") and "/" not in text and all(p.isidentifier() for p in text.split("."))


def _on_sys_path(folder: Path) -> None:
    if os.fspath(folder) not in sys.path:
        sys.path.insert(0, os.fspath(folder))


def _import_file(path: Path) -> str:
    _on_sys_path(path.parent)
    return _import_module(path.stem, path)


def _import_named(name: str) -> str:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise PluginError(f"--include {name}: no such file, folder or importable module") from e
        raise plugin_error(f"--include {name}", name, e) from e
    except (Exception, SystemExit) as e:  # any error in the plug-in's code: name it
        raise plugin_error(f"--include {name}", name, e) from e
    return name


def _import_module(name: str, path: Path) -> str:
    known = sys.modules.get(name)
    if known is not None and Path(getattr(known, "__file__", "") or "").resolve() == path.resolve():
        return name
    if known is not None:
        raise PluginError(f"--include {path}: the module name {name!r} is already taken by "
                          f"{getattr(known, '__file__', known)}; rename the file")
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit) as e:  # any error in user code: report which file failed and why
        raise plugin_error(f"--include {path}", name, e) from e
    if Path(getattr(module, "__file__", "") or "").resolve() != path.resolve():
        raise PluginError(f"--include {path}: importing {name!r} found {getattr(module, '__file__', module)} "
                          "first on sys.path; rename the file")
    return name
