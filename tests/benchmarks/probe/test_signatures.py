"""Every function of ``benchmarks/probe`` takes at most 8 parameters and is fully annotated.

Stage functions take small typed groups (``RunOptions``, ``RunContext``, ``RecordSlot``,
``ReadoutResult``, ``DecoderCheckpoint``, ``DecoderShape``) instead of long argument lists, and
``run_probe`` itself takes 8 (the protocol by object, dict or name: ``"quick"`` replaced the
``quick`` flag). The scan reads the source (``ast``), so nested helpers count too; a method's
``self`` / ``cls`` is not a parameter.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from benchmarks.probe.api import run_probe
from sapiens2.errors import UnknownNameError

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "benchmarks" / "probe"
MAX_PARAMETERS = 8


def _functions(tree: ast.AST):
    """(function node, whether it is a method) of every ``def`` in ``tree``, nested ones too."""

    def visit(node: ast.AST, in_class: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, in_class
                yield from visit(child, False)
            else:
                yield from visit(child, in_class or isinstance(child, ast.ClassDef))

    yield from visit(tree, False)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[ast.arg]:
    """Every parameter (``*args`` and ``**kwargs`` included) but a method's ``self`` / ``cls``."""
    a = node.args
    every = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if method and not static and (a.posonlyargs or a.args):
        every = every[1:]
    return every


def scan(source: str, where: str) -> tuple[list[str], list[str]]:
    """(functions over :data:`MAX_PARAMETERS` parameters, functions missing annotations), each named
    ``where:line name`` and what is wrong."""
    too_many, untyped = [], []
    for node, method in _functions(ast.parse(source)):
        params = _parameters(node, method)
        name = f"{where}:{node.lineno} {node.name}"
        if len(params) > MAX_PARAMETERS:
            too_many.append(f"{name} ({len(params)} parameters)")
        missing = [p.arg for p in params if p.annotation is None]
        if node.returns is None and node.name != "__init__":
            missing.append("return")
        if missing:
            untyped.append(f"{name}: no annotation for {', '.join(missing)}")
    return too_many, untyped


def _scan_probe() -> tuple[list[str], list[str]]:
    too_many, untyped = [], []
    for path in sorted(PROBE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        over, bare = scan(path.read_text(encoding="utf-8"), rel)
        too_many += over
        untyped += bare
    return too_many, untyped


def test_the_scan_finds_long_and_untyped_functions():
    source = '''
def nine(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int) -> None: ...
def bare(x, y: int): ...
def star(*args: int, **kwargs: int) -> None: ...
def cls_is_a_parameter_here(cls, a: int) -> None: ...
class K:
    def method(self, x: int) -> int:
        def inner(y):
            return y
        return x
    @classmethod
    def make(cls, x: int) -> "K": ...
    @staticmethod
    def free(x) -> None: ...
    def __init__(self, x: int): ...
'''
    too_many, untyped = scan(source, "toy.py")
    assert too_many == ["toy.py:2 nine (9 parameters)"]
    assert untyped == [
        "toy.py:3 bare: no annotation for x, return",
        "toy.py:5 cls_is_a_parameter_here: no annotation for cls",
        "toy.py:8 inner: no annotation for y, return",
        "toy.py:14 free: no annotation for x",
    ]


def test_no_probe_function_takes_more_than_eight_parameters():
    too_many, _ = _scan_probe()
    assert too_many == []


def test_every_probe_function_is_fully_annotated():
    _, untyped = _scan_probe()
    assert untyped == []


def test_run_probe_takes_the_protocol_by_name(tmp_path):
    params = inspect.signature(run_probe).parameters
    assert len(params) <= MAX_PARAMETERS and "quick" not in params
    # both fail before any data is read (the data folder does not exist)
    with pytest.raises(UnknownNameError, match=r"'quik'.*default, quick"):
        run_probe("pixels", "seg", tmp_path / "never_read", tmp_path / "out", protocol="quik")
    with pytest.raises(TypeError, match=r"run_probe protocol: expected a ProbeProtocol.*got int"):
        run_probe("pixels", "seg", tmp_path / "never_read", tmp_path / "out", protocol=3)
