"""``@remote_module.interface``: one decorator for interface classes, with or without
TorchScript.

Where TorchScript is available it is ``torch.jit.interface`` (the scriptable family), without
torch's deprecation warning for it; the class may subclass ``typing.Protocol`` and give its
methods ``...`` bodies, which type checkers accept and TorchScript does not: TorchScript is
given the same signatures with ``pass`` bodies instead. Where TorchScript is unavailable, the
class is a ``typing.Protocol`` interface (the eager family).
"""

from __future__ import annotations
import __future__

import ast
import inspect
import linecache
import sys
import textwrap
import types
import typing
from typing import Any, TypeVar

import torch

from remote_module import _torchscript

__all__ = ["interface"]

T = TypeVar("T", bound=type)

# What a class body holds that is no part of the interface (Protocol's machinery included).
_NOT_MEMBERS = frozenset(
    {"__dict__", "__weakref__", "__init__", "__subclasshook__", "__parameters__"}
)


def interface(cls: T) -> T:
    """Make ``cls`` an interface for ``RemoteModule(..., module_interface_cls=cls)`` and
    ``remote-module-codegen``: a ``@torch.jit.interface`` where TorchScript is available,
    else a ``typing.Protocol``.

    Example::

        >>> @remote_module.interface
        ... class ScorerInterface(Protocol):
        ...     def forward(self, x: Tensor, scale: float = 1.0) -> Tensor: ...
    """
    if not inspect.isclass(cls):
        raise TypeError(f"@remote_module.interface decorates a class, not {cls!r}")
    methods = {
        name: value
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }
    if not _torchscript.available():
        return cls if _is_protocol(cls) else _as_protocol(cls, methods)
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    namespace.update((name, _with_pass_body(cls, function)) for name, function in methods.items())
    plain = types.new_class(cls.__name__, (), exec_body=lambda body: body.update(namespace))
    # torch.jit.interface resolves the names in the signatures in its caller's frame: call it
    # from a frame whose globals are the interface's module's, as a decorator there would.
    module = sys.modules.get(cls.__module__)
    module_globals = vars(module) if module is not None else {}
    scope = {"_rm_jit_interface": torch.jit.interface, "_rm_class": plain}
    with _torchscript.on_purpose():
        exec("_rm_class = _rm_jit_interface(_rm_class)", module_globals, scope)
    return typing.cast(T, scope["_rm_class"])


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _as_protocol(cls: type, methods: dict[str, Any]) -> Any:
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, **methods}
    return types.new_class(
        cls.__name__, (typing.Protocol,), exec_body=lambda body: body.update(namespace)
    )


def _with_pass_body(cls: type, function: types.FunctionType) -> types.FunctionType:
    """``function`` again, its body ``pass`` (what TorchScript requires of an interface's
    methods), compiled from its own signature's source in its own module's globals, under a
    file name whose source TorchScript can read back."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise ValueError(
            f"@remote_module.interface: cannot read the source of "
            f"{cls.__qualname__}.{function.__name__} ({error})"
        ) from None
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise ValueError(
            f"@remote_module.interface: {cls.__qualname__}.{function.__name__} is not a plain def"
        )
    definition.decorator_list = []
    definition.body = [ast.Pass()]
    text = ast.unparse(definition) + "\n"
    filename = f"<remote_module interface {cls.__module__}.{cls.__qualname__}.{function.__name__}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    future = function.__code__.co_flags & __future__.annotations.compiler_flag
    code = compile(text, filename, "exec", flags=future, dont_inherit=True)
    module = sys.modules.get(function.__module__)
    module_globals = vars(module) if module is not None else {}
    defined: dict[str, Any] = {}
    exec(code, module_globals, defined)
    rebuilt: types.FunctionType = defined[function.__name__]
    rebuilt.__qualname__ = function.__qualname__
    rebuilt.__doc__ = function.__doc__
    return rebuilt
