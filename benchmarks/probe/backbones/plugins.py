"""User backbones from outside the package: ``--include PATH`` and ``package.module:ClassName`` names.

``import_paths`` (:func:`sapiens2.plugins.include`, which every command runs for its ``--include``
before its parser is built, like lm-evaluation-harness's ``--include_path``) imports ``.py`` files,
folders and modules, so classes they register in ``PROBE_BACKBONES`` are known by name;
``backbone_class`` resolves ``"pkg.module:ClassName"`` to a
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

from benchmarks.probe.backbones.base import ProbeBackbone
from sapiens2.errors import BenchError, UnknownNameError
from sapiens2.plugins import include as import_paths  # noqa: F401 (the backbones' name of it)
from sapiens2.plugins import plugin_error


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
    return BackboneSpecError(str(plugin_error(what, module, e)))


def _what(obj: object) -> str:
    return f"the class {obj.__name__}" if inspect.isclass(obj) else f"a {type(obj).__name__}"
