"""Cheap repeated ``torch.jit.script(rm)``: parse each exported method once per process.

``torch.jit.script`` turns every method it compiles into a stub (the method's parsed source
and a name-resolution callback) on every call, even when the module's type and its compiled
methods are cached: reading and tokenizing the source of every method again is most of what
scripting a second RemoteModule costs. The stub of a generated method depends only on the
function, so it is made once and reused: just before scripting (``__prepare_scriptable__``)
the RemoteModule's exported methods are replaced by callable stubs, which torch takes as they
are and Python calls like the bound methods they replace.

This leans on ``torch.jit._recursive.ScriptMethodStub`` and ``make_stub``; where a torch
lacks them, methods stay as they are and torch parses them as usual.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["use_script_stubs"]

_recursive = getattr(torch.jit, "_recursive", None)
_ScriptMethodStub: Any = getattr(_recursive, "ScriptMethodStub", None)
_make_stub: Any = getattr(_recursive, "make_stub", None)
_EXPORT = getattr(getattr(torch._jit_internal, "FunctionModifiers", None), "EXPORT", None)
_SUPPORTED = _ScriptMethodStub is not None and _make_stub is not None and _EXPORT is not None

_lock = threading.Lock()
# function -> (resolution callback, parsed def): what torch would compute on every script.
_parsed: weakref.WeakKeyDictionary[Callable[..., Any], tuple[Any, Any]] = (
    weakref.WeakKeyDictionary()
)

if _SUPPORTED:

    class _BoundStub(_ScriptMethodStub):
        """A method's compile stub that is also the method bound to its module."""

        _torchscript_modifier = _EXPORT  # an exported method, for torch's method search

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.original_method(self._rm_self, *args, **kwargs)


def use_script_stubs(module: torch.nn.Module, functions: list[Callable[..., Any]]) -> None:
    """Replace ``module``'s methods named like ``functions`` (plain functions taking ``self``,
    exported for TorchScript) with cached stubs bound to ``module``."""
    if not _SUPPORTED:
        return
    for function in functions:
        stub = _BoundStub(*_parse(function), function)
        stub._rm_self = module
        module.__dict__[function.__name__] = stub


def _parse(function: Callable[..., Any]) -> tuple[Any, Any]:
    with _lock:
        parsed = _parsed.get(function)
    if parsed is None:
        stub = _make_stub(function, function.__name__)
        parsed = (stub.resolution_callback, stub.def_)
        with _lock:
            _parsed[function] = parsed
    return parsed
