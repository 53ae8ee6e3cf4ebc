"""What an interface's source says, read with the errors naming the piece that is wrong: its
annotations resolved (:func:`type_hints`), and whether a class was decorated with
``@torch.jit.script`` (:func:`decorated_script`)."""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
import typing
from typing import Any

__all__ = ["decorated_script", "type_hints"]


def type_hints(obj: Any, where: str, item: str) -> dict[str, Any]:
    """``typing.get_type_hints(obj)`` (a function or a NamedTuple class). An annotation that
    does not resolve raises ``ValueError`` naming it after ``where``: the return type, or the
    ``item`` (``"argument"``, ``"field"``) of that name."""
    try:
        return typing.get_type_hints(obj)
    except Exception as error:  # a NameError or TypeError from a bad annotation
        annotations = getattr(obj, "__annotations__", {})
        bad = [name for name in annotations if not _resolves(obj, name, annotations[name])]
        if bad:
            where += ", return type" if bad[0] == "return" else f", {item} '{bad[0]}'"
        raise ValueError(f"{where}: cannot resolve its annotation: {error}") from error


def _resolves(obj: Any, name: str, annotation: Any) -> bool:
    namespace = getattr(obj, "__globals__", None)
    if namespace is None:
        module = sys.modules.get(getattr(obj, "__module__", ""))
        namespace = vars(module) if module is not None else {}
    try:
        typing.get_type_hints(types.SimpleNamespace(__annotations__={name: annotation}), namespace)
    except Exception:
        return False
    return True


def decorated_script(cls: type) -> bool:
    """Whether the definition of ``cls`` carries ``@torch.jit.script`` (by any spelling that
    ends in ``script``). Without source to read, True: TorchScript compiled it from some."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return True
    definition = tree.body[0] if tree.body else None
    decorators = definition.decorator_list if isinstance(definition, ast.ClassDef) else []
    return any(ast.unparse(decorator).split(".")[-1] == "script" for decorator in decorators)
