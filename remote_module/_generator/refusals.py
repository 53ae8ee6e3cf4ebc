"""What TorchScript refuses in a user's interface module, said in one line that names the
thing, for ``remote-module-codegen``.

``@torch.jit.interface`` compiles its class while the interface's module is imported, and
TorchScript's refusal is then raised from the import: several lines, with an excerpt of the
source. The CLI imports interface modules inside :func:`kept`: a class TorchScript refuses
stays a plain class and the refusal is kept. :func:`explain` reads that class with the
generator's own checks, which name the interface, the method and the argument (or the
return) and what is wrong, and falls back to TorchScript's first line, named with the method
it points at. :func:`one_line` shortens any other TorchScript error to its first line and
where it points.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from remote_module._generator.model import InterfaceKind
from remote_module._generator.parse import parse_interface

__all__ = ["Refusal", "explain", "kept", "one_line"]

_LOCATION = re.compile(r'File "([^"\n]+)", line (\d+)')


class Refusal(NamedTuple):
    """A class ``@torch.jit.interface`` refused to compile, and TorchScript's error."""

    cls: type
    error: Exception


@contextlib.contextmanager
def kept() -> Iterator[list[Refusal]]:
    """Inside, ``torch.jit.interface`` keeps a class it refuses, plain, and lists the refusal
    in the list this yields (an import then goes on, so its module's classes can be read)."""
    refused: list[Refusal] = []
    compile_interface = torch.jit.interface

    def interface(obj: Any) -> Any:
        caller = sys._getframe(1)
        # TorchScript resolves the names in the signatures in its caller's frame: call it from
        # a frame with the decorator's globals and locals, as the decorator's line would.
        scope = {**caller.f_locals, "_rm_compile": compile_interface, "_rm_class": obj}
        try:
            exec("_rm_class = _rm_compile(_rm_class)", caller.f_globals, scope)
        except Exception as error:
            if not inspect.isclass(obj):
                raise
            refused.append(Refusal(obj, error))
            return obj
        return scope["_rm_class"]

    torch.jit.interface = interface
    try:
        yield refused
    finally:
        torch.jit.interface = compile_interface


def explain(refusal: Refusal) -> str:
    """Why TorchScript refused the class: the generator's own check where one refuses it too,
    else TorchScript's first line, after the interface (and the method it points at)."""
    cls, error = refusal
    try:
        parse_interface(cls, kind=InterfaceKind.SCRIPT)
    except ValueError as own:
        return str(own)
    where = f"{cls.__module__}.{cls.__qualname__}"
    method = _method_at(cls, error)
    if method is not None:
        where = f"{where}.{method}"
    return f"{where}: TorchScript refuses it: {_first_line(error)}"


def one_line(error: BaseException) -> str | None:
    """TorchScript's error in one line, its first and the file and line it points at; None
    for an error that is not TorchScript's account of some source."""
    text = str(error)
    location = _LOCATION.search(text)
    if location is None or "<--- HERE" not in text:
        return None
    return f"{_first_line(error)} ({location[1]}, line {location[2]})"


def _first_line(error: BaseException) -> str:
    return str(error).strip().split("\n", 1)[0].rstrip(":").rstrip(".")


def _method_at(cls: type, error: BaseException) -> str | None:
    """The method of ``cls`` whose source holds the line TorchScript's error points at."""
    location = _LOCATION.search(str(error))
    if location is None:
        return None
    path, line = location[1], int(location[2])
    starts = [
        (code.co_firstlineno, name)
        for name, value in vars(cls).items()
        if inspect.isfunction(value)
        and (code := value.__code__).co_filename == path
        and code.co_firstlineno <= line
    ]
    return max(starts)[1] if starts else None
