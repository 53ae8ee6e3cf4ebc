"""Layouts: how a call's values are flattened to what an op's schema carries (tensors, and one
string for the rest) and rebuilt on each side (``remote_module.runtime.caller.compiled``; an
owner reads them too, for its fake runs).

A layout is a tree of tuples: ``("T",)`` a tensor (the next of the op's tensors), ``("c", v)``
a constant (a number, bool, string or None), ``("t", items)``, ``("l", items)``, ``("d", keys,
items)`` and ``("n", "module:QualName", items)`` a tuple, list, dict or NamedTuple. On the
op's string argument it is JSON (lists for tuples).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import torch

__all__ = [
    "NAMED",
    "arguments",
    "decode",
    "encode",
    "from_text",
    "named_class",
    "rebuild",
    "skeleton",
]

# "module:QualName" -> the NamedTuple class: what a traced rebuild reads (Dynamo guards the
# entry), filled where a layout naming it was made or read.
NAMED: dict[str, Any] = {}


def skeleton(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The layout of ``value``, its tensors appended to ``tensors`` (Dynamo traces it)."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return ("T",)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        cls = type(value)
        name = f"{cls.__module__}:{cls.__qualname__}"
        return ("n", name, tuple(skeleton(item, tensors) for item in value))
    if isinstance(value, tuple):
        return ("t", tuple(skeleton(item, tensors) for item in value))
    if isinstance(value, list):
        return ("l", tuple(skeleton(item, tensors) for item in value))
    if isinstance(value, dict):
        keys = tuple(value)
        return ("d", keys, tuple(skeleton(value[key], tensors) for key in keys))
    return ("c", value)


def encode(layout: Any) -> str:
    """A layout as the op's string argument (JSON, deterministic)."""
    _note_classes(layout)
    return json.dumps(layout, separators=(",", ":"))


def decode(text: str) -> Any:
    """The layout an op's string argument holds (lists where it had tuples)."""
    return json.loads(text)


def rebuild(layout: Any, tensors: list[torch.Tensor]) -> Any:
    """The value ``layout`` describes, its tensors taken from ``tensors`` in order (Dynamo
    traces it for results: NamedTuple classes come from :data:`NAMED`)."""
    return _build(layout, iter(tensors))


def _build(layout: Any, tensors: Any) -> Any:
    kind = layout[0]
    if kind == "T":
        return next(tensors)
    if kind == "c":
        return layout[1]
    if kind == "t":
        return tuple(_build(item, tensors) for item in layout[1])
    if kind == "l":
        return [_build(item, tensors) for item in layout[1]]
    if kind == "d":
        keys, items = layout[1], layout[2]  # (no zip: Dynamo traces this)
        return {keys[i]: _build(items[i], tensors) for i in range(len(keys))}
    return NAMED[layout[1]](*(_build(item, tensors) for item in layout[2]))


def from_text(text: str, tensors: list[torch.Tensor]) -> Any:
    """The value a layout in its string form describes, with ``tensors``."""
    tree = decode(text)
    _note_classes(tree)
    return rebuild(tree, tensors)


def arguments(layout: str, tensors: list[torch.Tensor]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` of a call from its op's layout and tensors."""
    args, kwargs = from_text(layout, tensors)
    return tuple(args), kwargs


def named_class(name: str) -> Any:
    """The NamedTuple class a layout names (``module:QualName``), imported where needed."""
    cls = NAMED.get(name)
    if cls is None:
        module_name, _, qualname = name.partition(":")
        cls = importlib.import_module(module_name)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        NAMED[name] = cls
    return cls


def _note_classes(layout: Any) -> None:
    """Every NamedTuple class ``layout`` names, in :data:`NAMED`."""
    kind = layout[0]
    if kind == "n":
        named_class(layout[1])
    if kind in ("t", "l", "n"):
        for item in layout[-1]:
            _note_classes(item)
    elif kind == "d":
        for item in layout[2]:
            _note_classes(item)
