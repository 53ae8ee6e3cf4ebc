"""Layouts: how a call's values are flattened to what an op's schema carries (tensors, and one
string for the rest) and rebuilt on each side (``remote_module.runtime.caller.compiled``; an
owner reads them too, for its fake runs).

A layout is a tree of tuples: ``("T",)`` a tensor (the next of the op's tensors), ``("c", v)``
a constant (a number, bool, string or None), ``("t", items)``, ``("l", items)``, ``("d", keys,
items)`` and ``("n", "module:QualName", items)`` a tuple, list, dict or NamedTuple. On the
op's string argument it is JSON (lists for tuples). In a result, a number or bool is a value,
not a constant: ``("s",)``, carried as a 0-d tensor of the op and read back with ``.item()``
(torch.compile needs ``torch._dynamo.config.capture_scalar_outputs`` for that in one graph).
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
    "fake_rebuild",
    "from_text",
    "named_class",
    "rebuild",
    "result_skeleton",
    "skeleton",
]

# A call's ints and floats, taken out of its layout (``skeleton``'s ``numbers``).
Numbers = tuple[list[Any], list[Any]]

# "module:QualName" -> the NamedTuple class: what a traced rebuild reads (Dynamo guards the
# entry), filled where a layout naming it was made or read.
NAMED: dict[str, Any] = {}


def skeleton(value: Any, tensors: list[torch.Tensor], numbers: Numbers | None = None) -> Any:
    """The layout of ``value``, its tensors appended to ``tensors`` (Dynamo traces it); with
    ``numbers`` (``(ints, floats)``), its ints and floats appended there too, ``("i",)`` and
    ``("f",)`` in the layout: an op takes them as its own arguments, which torch may make
    symbolic (a number that changes from call to call), where a layout is a constant."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return ("T",)
    if numbers is not None and not isinstance(value, bool):
        if isinstance(value, int):
            numbers[0].append(value)
            return ("i",)
        if isinstance(value, float):
            numbers[1].append(value)
            return ("f",)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        cls = type(value)
        name = f"{cls.__module__}:{cls.__qualname__}"
        return ("n", name, tuple(skeleton(item, tensors, numbers) for item in value))
    if isinstance(value, tuple):
        return ("t", tuple(skeleton(item, tensors, numbers) for item in value))
    if isinstance(value, list):
        return ("l", tuple(skeleton(item, tensors, numbers) for item in value))
    if isinstance(value, dict):
        keys = tuple(value)
        return ("d", keys, tuple(skeleton(value[key], tensors, numbers) for key in keys))
    return ("c", value)


def result_skeleton(value: Any, tensors: list[torch.Tensor]) -> Any:
    """:func:`skeleton` of a call's result: its numbers and bools carried as 0-d tensors."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, torch.Tensor):
        tensors.append(torch.tensor(value))
        return ("s",)
    if isinstance(value, torch.Tensor) or not isinstance(value, (tuple, list, dict)):
        return skeleton(value, tensors)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        cls = type(value)
        name = f"{cls.__module__}:{cls.__qualname__}"
        return ("n", name, tuple(result_skeleton(item, tensors) for item in value))
    if isinstance(value, tuple):
        return ("t", tuple(result_skeleton(item, tensors) for item in value))
    if isinstance(value, list):
        return ("l", tuple(result_skeleton(item, tensors) for item in value))
    keys = tuple(value)
    return ("d", keys, tuple(result_skeleton(value[key], tensors) for key in keys))


def encode(layout: Any) -> str:
    """A layout as the op's string argument (JSON, deterministic)."""
    _note_classes(layout)
    return json.dumps(layout, separators=(",", ":"))


def decode(text: str) -> Any:
    """The layout an op's string argument holds (lists where it had tuples)."""
    return json.loads(text)


def rebuild(layout: Any, tensors: list[torch.Tensor], numbers: tuple[Any, Any] = ((), ())) -> Any:
    """The value ``layout`` describes, its tensors taken from ``tensors`` in order, its
    numbers from ``numbers`` (Dynamo traces it for results: NamedTuple classes come from
    :data:`NAMED`)."""
    return _build(layout, (iter(tensors), iter(numbers[0]), iter(numbers[1])))


def _build(layout: Any, taken: tuple[Any, Any, Any]) -> Any:
    kind = layout[0]
    if kind == "T":
        return next(taken[0])
    if kind == "s":
        return next(taken[0]).item()
    if kind == "i":
        return next(taken[1])
    if kind == "f":
        return next(taken[2])
    if kind == "c":
        return layout[1]
    if kind == "t":
        return tuple(_build(item, taken) for item in layout[1])
    if kind == "l":
        return [_build(item, taken) for item in layout[1]]
    if kind == "d":
        keys, items = layout[1], layout[2]  # (no zip: Dynamo traces this)
        return {keys[i]: _build(items[i], taken) for i in range(len(keys))}
    return NAMED[layout[1]](*(_build(item, taken) for item in layout[2]))


def from_text(text: str, tensors: list[torch.Tensor], numbers: tuple[Any, Any] = ((), ())) -> Any:
    """The value a layout in its string form describes, with ``tensors`` and ``numbers``
    (each string decoded once: a compiled call's layout is the same on every call)."""
    tree = _decoded.get(text)
    if tree is None:
        tree = decode(text)
        _note_classes(tree)
        if len(_decoded) < _DECODED_MAX:
            _decoded[text] = tree
    return rebuild(tree, tensors, numbers)


_DECODED_MAX = 4096  # layouts kept decoded (a graph has a few; a bound all the same)
_decoded: dict[str, Any] = {}


def fake_rebuild(layout: Any, tensors: list[torch.Tensor]) -> Any:
    """A result as a fake run describes it: its numbers (fake 0-d tensors there) as
    placeholders of their type, the rest as :func:`rebuild` makes it."""
    _note_classes(layout)
    kept: list[torch.Tensor] = []
    return rebuild(_placeheld(layout, iter(tensors), kept), kept)


def _placeheld(layout: Any, tensors: Any, kept: list[torch.Tensor]) -> Any:
    kind = layout[0]
    if kind == "T":
        kept.append(next(tensors))
        return layout
    if kind == "s":
        dtype = next(tensors).dtype
        return ("c", False if dtype == torch.bool else 0.0 if dtype.is_floating_point else 0)
    if kind in ("t", "l"):
        return (kind, [_placeheld(item, tensors, kept) for item in layout[1]])
    if kind in ("d", "n"):
        return (kind, layout[1], [_placeheld(item, tensors, kept) for item in layout[2]])
    return layout


def arguments(
    layout: str, tensors: list[torch.Tensor], numbers: tuple[Any, Any] = ((), ())
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``(args, kwargs)`` of a call from its op's layout, tensors and numbers (a call of
    tensors alone, the common one, without a walk of its layout)."""
    alone = _tensors_alone.get(layout)
    if alone is None:
        alone = _positional_tensors(decode(layout))
        if len(_tensors_alone) < _DECODED_MAX:
            _tensors_alone[layout] = alone
    if alone:
        return tuple(tensors), {}
    args, kwargs = from_text(layout, tensors, numbers)
    return tuple(args), kwargs


# An argument layout -> whether it is positional tensors alone, no keywords.
_tensors_alone: dict[str, bool] = {}


def _positional_tensors(tree: Any) -> bool:
    """Whether a decoded ``(args, kwargs)`` layout is tensors alone, positional."""
    _, (args, kwargs) = tree
    return args[0] == "t" and all(item == ["T"] for item in args[1]) and kwargs == ["d", [], []]


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
