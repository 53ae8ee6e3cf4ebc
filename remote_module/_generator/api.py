"""Views of the model for generated code: the finished pieces a template puts in place.

Like torchgen's ``api/`` layer, these turn the model into what a template needs: names of
generated functions, declarations, argument lists, expressions, import lines, laid out as
``ruff format`` writes them (``remote_module._generator.layout``); the walkers' names and pieces
are in ``remote_module._generator.walkers``. The templates hold the code's shape (statements,
branches, which piece goes where) and never build a piece of code themselves.

Example::

    >>> remote_name(parse_interface(MyModuleInterface).methods[0])
    '_remote_forward'
"""

from __future__ import annotations

import re
from typing import NamedTuple

from remote_module._generator.layout import (
    LINE_LENGTH,
    Expr,
    ImportLine,
    define,
    wrapped,
    wrapped_comprehension,
)
from remote_module._generator.model import Interface, Method
from remote_module._generator.walkers import movable_types, walker_name
from remote_module._shared import (
    REMOTE_PREFIX,
)

__all__ = [
    "LINE_LENGTH",
    "Binding",
    "Expr",
    "ImportLine",
    "async_name",
    "define",
    "imports",
    "module_file_name",
    "movable_types",
    "remote_name",
    "typed_class_name",
    "walker_name",
    "wrapped",
    "wrapped_comprehension",
]


class Binding(NamedTuple):
    """One parameter as generated code declares it."""

    name: str
    annotation: str
    default: str | None = None

    def decl(self) -> str:
        """``name: annotation`` or ``name: annotation = default``."""
        text = f"{self.name}: {self.annotation}"
        return text if self.default is None else f"{text} = {self.default}"


def remote_name(method: Method) -> str:
    """The function that runs on the owner (``_remote_forward`` for ``forward``)."""
    return f"{REMOTE_PREFIX}{method.name}"


def async_name(method: Method) -> str:
    return f"{method.name}_async"


def typed_class_name(interface: Interface) -> str:
    """The typed RemoteModule subclass generated for ``interface``."""
    return f"Remote{interface.name}"


def imports(interface: Interface) -> tuple[ImportLine, ...]:
    """What the generated module imports of the user's code: the interface and every type
    its signatures name, one line per module, sorted by module."""
    by_module: dict[str, set[str]] = {interface.module: {interface.name}}
    for named in interface.named_types:
        by_module.setdefault(named.module, set()).add(named.name)
    return tuple(
        ImportLine(module, tuple(sorted(names, key=_import_order)))
        for module, names in sorted(by_module.items())
    )


def module_file_name(interface_name: str) -> str:
    """The generated module's file: the interface's name in snake case."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", interface_name)
    return f"{snake.lower()}.py"


def _import_order(name: str) -> tuple[int, str]:
    """isort's default order of imported names: CONSTANTS, Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)
